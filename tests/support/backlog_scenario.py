"""A job started on input that is already waiting, on a standalone cluster, watched over REST.

Shared by the backlog benchmark (`benchmarks/bench_backlog.py`) and the reliability test
that kills a TaskManager mid-backlog: a spec whose file source holds the whole backlog,
a Gemini test-double responder with a fixed latency that counts calls per input id, and a
`BacklogWatch` that samples, every half second, the committed outputs, the outputs the
model has produced and the job's checkpoint history.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doubles import text_reply

from streamagents.connectors.files import read_jsonl
from streamagents.connectors.loopback_stub import RecordedRequest, StubReply
from streamagents.jobs.cluster.standalone import rest_call

CLI = str(Path(sys.executable).parent / "streamagents")


class CountingTestModel:
    """Gemini test-double responder: answers `answered <id>` after `latency_s`, counting calls.

    The input id is read from the last user text `input <id> ...`; `calls` counts calls per
    id (a count above one is a call made again after a failure), `first_answer` keeps
    the moment each id was first answered, `answered_at` the wall-clock time (epoch
    seconds, as Flink's timestamps) of every answer and `received_at` of every request."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.calls: Counter[str] = Counter()
        self.first_answer: dict[str, float] = {}
        self.answered_at: list[float] = []
        self.received_at: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> StubReply:
        self.received_at.append(time.time())
        body = request.json
        contents = body.get("contents", []) if isinstance(body, dict) else []
        texts = [
            str(part.get("text", ""))
            for content in contents
            if content.get("role") == "user"
            for part in content.get("parts", [])
        ]
        marked = [text for text in texts if text.startswith("input ")]
        if not marked:
            return StubReply({"error": {"code": 400, "message": "no input"}}, status=400)
        input_id = marked[-1].split()[1]
        time.sleep(self.latency_s)
        with self._lock:
            self.calls[input_id] += 1
            self.first_answer.setdefault(input_id, time.monotonic())
            self.answered_at.append(time.time())
        return StubReply(text_reply(f"answered {input_id}"))

    @property
    def answered(self) -> int:
        """How many distinct inputs the model has answered."""
        with self._lock:
            return len(self.first_answer)


def input_id(n: int) -> str:
    """The id of the `n`-th input of the backlog."""
    return f"in-{n:06d}"


def write_backlog_spec(
    folder: Path,
    stub_url: str,
    *,
    inputs: int,
    keys: int,
    max_in_flight: int,
    interval_s: float,
    parallelism: int = 2,
    unaligned: bool = True,
    watch_interval_s: float | None = None,
    extra_agent: dict[str, Any] | None = None,
) -> Path:
    """Write the backlog (one JSON line per input, keys round robin) and the job's spec;
    with `watch_interval_s`, the source watches its folder for more (see `add_inputs`)."""
    (folder / "data").mkdir(parents=True)
    add_inputs(folder, "inputs", range(inputs), keys)
    files: dict[str, Any] = {"path": "data"}
    if watch_interval_s is not None:
        files["watch_interval_s"] = watch_interval_s
    spec = {
        "name": "backlog",
        "source": {"files": files},
        "key": "customer",
        "agent": {
            "model": {
                "provider": "gemini",
                "model": "gemini-2.5-flash",
                "options": {"api_key": "stub-key", "base_url": stub_url},
            },
            "system_prompt": "Answer the customer.",
            "memory": {"max_messages": 4},
            "budgets": {"run_timeout_s": 300},
            "max_in_flight": max_in_flight,
            **(extra_agent or {}),
        },
        "event_log": {"path": "out/events", "level": "standard"},
        "sinks": {
            "outputs": {"path": "out/answers"},
            "dead_letters": {"path": "out/dead_letters"},
        },
        "parallelism": parallelism,
        "checkpointing": {
            "interval_s": interval_s,
            "dir": "out/checkpoints",
            "unaligned": unaligned,
        },
    }
    path = folder / "backlog.yaml"  # JSON is YAML
    path.write_text(json.dumps(spec, indent=2))
    return path


def add_inputs(folder: Path, name: str, numbers: range, keys: int) -> None:
    """Add the inputs `numbers` to the job's source folder as one file, atomically."""
    hidden = folder / "data" / f".{name}.tmp"
    with hidden.open("w") as out:
        for n in numbers:
            text = f"input {input_id(n)} where is my order?"
            record = {"id": input_id(n), "customer": f"c{n % keys:05d}", "text": text}
            out.write(json.dumps(record) + "\n")
    hidden.rename(folder / "data" / f"{name}.jsonl")


def _cli_env() -> dict[str, str]:
    """This environment without provider API keys, this interpreter's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "OPENAI_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the `streamagents` command of this interpreter, without provider API keys."""
    return subprocess.run(
        [CLI, *args], env=_cli_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def submit(spec: Path, address: str) -> str:
    """Submit `spec` to the cluster at `address`; the job id."""
    submitted = cli("submit", str(spec), "--jobmanager", address)
    if submitted.returncode != 0:
        raise RuntimeError(submitted.stdout[-2000:] + submitted.stderr[-3000:])
    found = re.search(r"^([0-9a-f]{32})$", submitted.stdout, re.MULTILINE)
    if not found:
        raise RuntimeError(f"no job id in: {submitted.stdout[-2000:]}")
    return found.group(1)


def submit_and_follow(spec: Path, address: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    """Start `streamagents submit --wait` (which holds a bounded input open and ends the job
    once it is answered) with its output in `log`; returns it and the job id."""
    process = subprocess.Popen(
        [CLI, "submit", str(spec), "--jobmanager", address, "--wait"],
        env=_cli_env(),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = re.search(r"^([0-9a-f]{32})$", log.read_text(), re.MULTILINE)
        if found:
            return process, found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"no job id from submit --wait: {log.read_text()[-3000:]}")


def source_finished(address: str, job_id: str) -> bool:
    """Whether the job's file source (the vertex `Source: source ...`) has FINISHED."""
    try:
        vertices = rest_call(address, f"/jobs/{job_id}", timeout_s=10)["vertices"]
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return False
    return any(
        str(v["name"]).startswith("Source: source") and v["status"] == "FINISHED" for v in vertices
    )


@dataclass
class Sample:
    """The job at one moment: seconds since submission, outputs committed and produced."""

    at_s: float
    committed: int
    produced: int


@dataclass
class BacklogWatch:
    """Samples a job's committed and produced outputs and its checkpoints every half second."""

    address: str
    job_id: str
    answers: Path
    model: CountingTestModel
    log: Path | None = None
    """The following command's output, shown when a wait times out."""
    started: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=dict)

    def state(self) -> str | None:
        """The job's state, None while the REST API does not answer."""
        try:
            return str(rest_call(self.address, f"/jobs/{self.job_id}", timeout_s=10)["state"])
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            return None

    def sample(self) -> Sample:
        """Record the outputs committed and produced now, and the checkpoint history."""
        committed = len(read_jsonl(self.answers)) if self.answers.exists() else 0
        now = Sample(round(time.monotonic() - self.started, 2), committed, self.model.answered)
        self.samples.append(now)
        try:
            reply = rest_call(self.address, f"/jobs/{self.job_id}/checkpoints", timeout_s=10)
        except (urllib.error.URLError, OSError, ValueError):
            return now
        for entry in reply.get("history", []):
            self.checkpoints[int(entry["id"])] = entry
        return now

    def wait_until(self, done: Any, timeout_s: float) -> None:
        """Sample every half second until `done(sample)` holds or the job ends."""
        deadline = time.monotonic() + timeout_s
        while True:
            now = self.sample()
            state = self.state()
            if state in ("FAILED", "CANCELED"):
                raise RuntimeError(f"job ended {state}")
            if state == "FINISHED" or done(now):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not done in {timeout_s}s: {now}\n{self._where()}")
            time.sleep(0.5)

    def _where(self) -> str:
        """Where the job is, for a wait that timed out: its tasks' states, its last
        checkpoints and the tail of the following command's output."""
        try:
            vertices = rest_call(self.address, f"/jobs/{self.job_id}", timeout_s=10)["vertices"]
            tasks = ", ".join(f"{v['name']}: {v['status']}" for v in vertices)
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            tasks = f"job details unavailable ({exc})"
        last = [
            (c["id"], c["status"], c.get("is_savepoint"))
            for _, c in sorted(self.checkpoints.items())[-5:]
        ]
        tail = self.log.read_text().splitlines()[-30:] if self.log and self.log.exists() else []
        return "\n".join([f"tasks: {tasks}", f"last checkpoints: {last}", *tail])

    def restored_checkpoint(self) -> tuple[int, float, float] | None:
        """The checkpoint the job last restored: its id, when it was triggered and when it
        was restored (epoch seconds); None if the job has not restored one."""
        try:
            reply = rest_call(self.address, f"/jobs/{self.job_id}/checkpoints", timeout_s=10)
            restored = reply["latest"]["restored"]
            checkpoint = int(restored["id"])
            triggered = self.checkpoints[checkpoint]["trigger_timestamp"]
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            return None
        return checkpoint, triggered / 1000, restored["restore_timestamp"] / 1000

    def completed_checkpoints(self) -> list[dict[str, Any]]:
        """The completed checkpoints, in id order, as the REST API gives them."""
        return [
            entry
            for _, entry in sorted(self.checkpoints.items())
            if entry.get("status") == "COMPLETED"
        ]


def commit_lag_s(samples: list[Sample]) -> float:
    """The longest time an output waited between being produced and being committed, read
    from `samples`: for each, how long before it the model had produced as many outputs as
    are committed then."""
    worst = 0.0
    for sample in samples:
        if sample.committed >= sample.produced:
            continue
        earliest = next((s.at_s for s in samples if s.produced > sample.committed), sample.at_s)
        worst = max(worst, sample.at_s - earliest)
    return round(worst, 1)
