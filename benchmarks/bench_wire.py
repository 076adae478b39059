"""Benchmark of the real provider path: a spec's job through the official SDKs over HTTP.

Each run builds the job from a YAML spec as `streamagents run` does (`build_job` on the
local mini-cluster) and points the wire's SDK (`gemini`: google-genai, `openai` and
`openai-responses`: openai) at `wire_server.py`, a cheap loopback server in its own
process. The same workload also runs with an in-process test double instead of the SDK
(`double`), for the engine's own share. Workloads: plain turns (inputs over keys) and a
tool loop (two model calls and one tool call per input, one input per key, so memory
cannot skip the call), at 0 ms and 200 ms model latency, event log `standard` and `off`.

Printed side by side, one line per run: turns/s (inputs finished per second, from the
server's first request to its last reply), mean and peak calls in flight, the limit
(`max_in_flight / latency`, per model call), CPU milliseconds of the TaskManager process
(the JVM with its embedded Python) per turn over the same window, the server's CPU per
request, and for the test double the milliseconds per turn that the TaskManager's Python
spent in its cyclic garbage collector (which holds the GIL). CPU per turn is the
headline: it moves far less with other load on the machine than turns/s.

Run: `python benchmarks/bench_wire.py` (quick: 400 inputs, a subset of cases, a few
minutes); `--full` for 1000 inputs over 100 keys and every case; `--wires` and `--cases`
pick a subset; `--rounds N` runs them all N times (every other round in reverse order,
so no case always comes first) and prints the medians, with the event log's cost at
`standard` against `off`; `--cluster` runs the scale-out comparison instead (a
standalone cluster of two one-slot TaskManagers, parallelism 1 against 2, CPU summed
over the TaskManagers).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from streamagents.connectors.providers import ChatModel
from streamagents.jobs.cluster.standalone import StandaloneCluster, interpreter_first
from streamagents.jobs.spec import load_spec
from streamagents.operators.agent import AgentConfig, AgentRuntime
from streamagents.serde.chat import ChatResponse, TokenUsage, ToolSpec
from streamagents.serde.messages import ChatMessage, ToolCall

SDK_WIRES = ("gemini", "openai", "openai-responses")
WIRES = (*SDK_WIRES, *(f"{wire}+worker" for wire in SDK_WIRES), "double")
"""`+worker`: the same wire with `sdk_process: true` (the SDK in a worker process, a spec's
default where the TaskManager may use two cores); without it `sdk_process: false` (the SDK
in the TaskManager, the default on one core)."""
TOOL = "streamagents.jobs.examples.support_tools:lookup_order"


@dataclass(frozen=True)
class Case:
    """One workload: model latency, tool loop or plain turns, event-log level."""

    latency_ms: int
    tools: bool
    log: str

    @property
    def name(self) -> str:
        """Short name, as `--cases` takes it."""
        return f"{self.latency_ms}ms-{'tool' if self.tools else 'plain'}-{self.log}"


ALL_CASES = [
    Case(ms, tools, log)
    for ms in (0, 200)
    for tools in (False, True)
    for log in ("standard", "off")
]
QUICK_CASES = ["0ms-plain-standard", "0ms-plain-off", "0ms-tool-standard", "200ms-plain-standard"]


class CollectorClock:
    """Seconds Python's cyclic garbage collector has run in this interpreter (installed in
    `gc.callbacks` once, by the first test double a TaskManager's Python builds)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


COLLECTOR = CollectorClock()


class PingingTestDouble(ChatModel):
    """Test double (not a provider): answers after a fixed delay and reports each call by
    a UDP datagram to the benchmark server, so it is timed like the HTTP wires. Calls the
    tool once per run when the agent has tools."""

    provider = "pinging-test-double"

    def __init__(self, port: int, latency_s: float) -> None:
        self.port = port
        self.latency_s = latency_s
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if COLLECTOR not in gc.callbacks:
            gc.callbacks.append(COLLECTOR)

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        """Wait, report the call, then answer (a tool call when none was answered yet)."""
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self._socket.sendto(str(COLLECTOR.seconds).encode(), ("127.0.0.1", self.port))
        if tools and messages[-1].role != "tool":
            call = ToolCall(id="call_1", name="lookup_order", arguments={"order_id": "O-5521"})
            message = ChatMessage(role="assistant", tool_calls=[call])
        else:
            message = ChatMessage(role="assistant", content="done")
        return ChatResponse(message=message, usage=TokenUsage(input_tokens=10, output_tokens=1))


def test_double_runtime(config: AgentConfig, port: int, latency_s: float) -> AgentRuntime:
    """The real runtime (tools included) around the pinging test double."""
    return AgentRuntime.from_config(config, model=PingingTestDouble(port, latency_s))


@contextmanager
def wire_server() -> Iterator[tuple[int, int]]:
    """Start `wire_server.py` in its own process; yield (port, pid)."""
    with tempfile.TemporaryDirectory() as folder:
        port_file = Path(folder) / "port"
        server = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("wire_server.py")), str(port_file)]
        )
        try:
            while not port_file.exists() or not port_file.read_text():
                time.sleep(0.05)
            yield int(port_file.read_text()), server.pid
        finally:
            server.terminate()
            server.wait()


def server_call(port: int, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A control request to the server (`/control` resets, `/stats` reads)."""
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", data=data) as reply:
        return json.loads(reply.read())


def _process_cpu_s(pid: int) -> float:
    """CPU seconds of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def taskmanager_pid() -> int:
    """The JVM this process started (the local mini-cluster, TaskManager and its Python)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            comm = stat.split("(", 1)[1].split(")", 1)[0]
            parent = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if comm == "java" and parent in (me, *_children(me)):
            return int(entry.name)
    raise RuntimeError("no JVM child of this process found")


def _descendants(pid: int) -> list[int]:
    children = _children(pid)
    return children + [d for child in children for d in _descendants(child)]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


class CpuSampler:
    """Samples the CPU seconds of processes (summed), and of their descendants (the SDK
    workers a TaskManager starts), every 20 ms, to read them back at any wall time."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = pids
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        workers: list[int] = []
        rescan = 0.0
        while not self._stop.wait(0.02):
            now = time.time()
            if now >= rescan:  # workers start with the job: look for them twice a second
                workers = [c for pid in self.pids for c in _descendants(pid)]
                rescan = now + 0.5
            own = sum(_process_cpu_s(pid) for pid in self.pids)
            self.samples.append((now, own, sum(_process_cpu_s(pid) for pid in workers)))

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, when: float, column: int = 1) -> float:
        """CPU seconds at wall time `when` (linear between the samples around it): of the
        processes (column 1) or of their descendants (column 2)."""
        before = max((s for s in self.samples if s[0] <= when), default=self.samples[0])
        after = min((s for s in self.samples if s[0] >= when), default=self.samples[-1])
        if after[0] == before[0]:
            return before[column]
        share = (when - before[0]) / (after[0] - before[0])
        return before[column] + share * (after[column] - before[column])


def write_spec(
    workdir: Path,
    wire: str,
    case: Case,
    port: int,
    inputs: int,
    keys: int,
    parallelism: int = 1,
    max_waiting_inputs: int | None = None,
) -> Path:
    """The job's inputs and YAML spec in `workdir`; returns the spec's path."""
    data = workdir / "inputs.jsonl"
    with data.open("w") as out:
        for i in range(inputs):
            text = f"where is order O-5521? ({i})" if case.tools else f"hi {i}"
            out.write(json.dumps({"id": f"i{i}", "key": f"k{i % keys}", "text": text}) + "\n")
    provider = "gemini" if wire == "double" else wire.removesuffix("+worker")
    base = f"http://127.0.0.1:{port}" + ("" if provider == "gemini" else "/v1")
    spec = {
        "name": "bench-wire",
        "source": {"files": {"path": str(data)}},
        "key": "key",
        "agent": {
            "model": {
                "provider": provider,
                "model": "bench",
                "options": {"api_key": "bench-placeholder", "base_url": base},
                "sdk_process": wire.endswith("+worker"),
            },
            "tools": [TOOL] if case.tools else [],
            "max_in_flight": 128,
            **({} if max_waiting_inputs is None else {"max_waiting_inputs": max_waiting_inputs}),
        },
        "media_store": str(workdir / "media"),
        "event_log": {"path": str(workdir / "events"), "level": case.log},
        "sinks": {
            "outputs": {"path": str(workdir / "answers")},
            "dead_letters": {"path": str(workdir / "dead")},
        },
        "parallelism": parallelism,
        "checkpointing": {"interval_s": 2, "dir": str(workdir / "checkpoints")},
    }
    path = workdir / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_job(spec_path: Path, wire: str, case: Case, port: int) -> None:
    """Build the spec's job as `streamagents run` does and run it to the end."""
    from pyflink.datastream import StreamExecutionEnvironment

    from streamagents.jobs.graph import build_job, flink_configuration
    from streamagents.jobs.model_choice import model_spec

    loaded = load_spec(spec_path)
    config = flink_configuration(loaded.spec)
    config.set_string("restart-strategy.type", "none")  # a failure ends the run, loudly
    env = StreamExecutionEnvironment.get_execution_environment(config)
    if wire == "double":
        factory = functools.partial(
            test_double_runtime, port=port, latency_s=case.latency_ms / 1000
        )
        build_job(env, loaded, model_spec(loaded.model), runtime_factory=factory)
    else:
        build_job(env, loaded, model_spec(loaded.model))
    env.execute(loaded.spec.name)


@dataclass
class Figures:
    """What one run measured."""

    turns_per_s: float
    mean_in_flight: float
    max_in_flight: int
    limit: float | None
    tm_cpu_ms_per_turn: float
    worker_cpu_ms_per_turn: float
    server_cpu_ms_per_request: float | None
    collector_ms_per_turn: float | None


def submit_job(spec_path: Path, cluster: StandaloneCluster) -> None:
    """Submit the spec's job to the standalone cluster and wait for its end."""
    command = [str(Path(sys.executable).with_name("streamagents")), "submit", str(spec_path)]
    command += ["--jobmanager", cluster.rest_address, "--wait"]
    subprocess.run(command, check=True, capture_output=True, env=cluster.environment())


def measure(
    wire: str,
    case: Case,
    port: int,
    inputs: int,
    keys: int,
    cluster: StandaloneCluster | None = None,
    parallelism: int = 1,
    max_waiting_inputs: int | None = None,
) -> Figures:
    """Run one wire on one case in a fresh work directory: on the local mini-cluster, or
    submitted to `cluster` at `parallelism` (CPU summed over its TaskManagers)."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-wire-"))
    try:
        keyed = inputs if case.tools else keys
        spec_path = write_spec(
            workdir, wire, case, port, inputs, keyed, parallelism, max_waiting_inputs
        )
        server_call(port, "/control", {"latency_ms": case.latency_ms})
        pids = [taskmanager_pid()] if cluster is None else cluster.taskmanager_pids()
        with CpuSampler(pids) as cpu:
            if cluster is None:
                run_job(spec_path, wire, case, port)
            else:
                submit_job(spec_path, cluster)
            time.sleep(0.05)
        stats = server_call(port, "/stats")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    calls_per_turn = 2 if case.tools else 1
    assert stats["requests"] == inputs * calls_per_turn, f"{stats['requests']} model calls"
    window = stats["last"] - stats["first"]
    turns = inputs - 1 / calls_per_turn  # the window opens at the first call, not before it
    tm_cpu = cpu.at(stats["last"]) - cpu.at(stats["first"])
    worker_cpu = cpu.at(stats["last"], 2) - cpu.at(stats["first"], 2)
    limit = 128 / (case.latency_ms / 1000) / calls_per_turn if case.latency_ms else None
    return Figures(
        turns_per_s=turns / window,
        mean_in_flight=stats["mean_in_flight"],
        max_in_flight=stats["max_in_flight"],
        limit=limit,
        tm_cpu_ms_per_turn=tm_cpu * 1000 / turns,
        worker_cpu_ms_per_turn=worker_cpu * 1000 / turns,
        server_cpu_ms_per_request=None
        if wire == "double"
        else stats["cpu_s"] * 1000 / stats["requests"],
        collector_ms_per_turn=None
        if stats["collector_s"] is None
        else stats["collector_s"] * 1000 / turns,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the chosen cases for the chosen wires and print the figures side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--full", action="store_true", help="1000 inputs, every case")
    parser.add_argument("--inputs", type=int, help="inputs per run (quick: 400, full: 1000)")
    parser.add_argument("--keys", type=int, default=100, help="keys of the plain turns")
    parser.add_argument("--wires", default=",".join(WIRES), help=f"subset of {WIRES}")
    parser.add_argument("--cases", help=f"subset of {[c.name for c in ALL_CASES]}")
    parser.add_argument(
        "--max-waiting-inputs",
        type=int,
        help="the spec's agent.max_waiting_inputs (default: the spec's default, 256); above "
        "it an input blocks the task thread for its key's call, so a burst larger than "
        "this is paced by that backpressure rather than by the model",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every case and wire this many times, in reverse order every other round, "
        "then print the median of each (with the event log's cost: standard against off)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="scale-out: submit to a standalone cluster of 2 TaskManagers (1 slot each) at "
        "parallelism 1 and 2 (wires only: the test double needs the local mini-cluster)",
    )
    args = parser.parse_args(argv)
    inputs = args.inputs or (1000 if args.full else 400)
    names = args.cases.split(",") if args.cases else (None if args.full else QUICK_CASES)
    cases = [c for c in ALL_CASES if names is None or c.name in names]
    wires = [w for w in args.wires.split(",") if not (args.cluster and w == "double")]
    if args.cluster:
        scale_out(wires, cases, inputs, args.keys)
        return
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
        f"{inputs} inputs, plain turns over {args.keys} keys, tool loop one input per key; "
        f"parallelism 1, max_in_flight 128, max_waiting_inputs {args.max_waiting_inputs or 256}"
    )
    print(
        f"{'case':<22} {'wire':<24} {'turns/s':>8} {'in flight':>10} {'peak':>5} "
        f"{'limit':>6} {'TM cpu ms/turn':>15} {'worker ms/turn':>15} {'server ms/req':>14} "
        f"{'gc ms/turn':>11}"
    )
    from pyflink.java_gateway import get_gateway

    # As `streamagents run` does: the JVM's thread-mode Python is the `python` on PATH.
    os.environ["PATH"] = interpreter_first(os.environ.get("PATH"))
    get_gateway()  # starts the JVM whose CPU is measured
    with wire_server() as (port, _pid):
        # A job first that is not measured: the JVM's first job pays its warm-up (class
        # loading, JIT), which made whichever case ran first look the most expensive.
        waiting = args.max_waiting_inputs
        measure(wires[0], cases[0], port, min(inputs, 200), args.keys, max_waiting_inputs=waiting)
        runs: dict[tuple[str, str], list[Figures]] = {}
        for round_ in range(args.rounds):
            grid = [(case, wire) for case in cases for wire in wires]
            for case, wire in grid if round_ % 2 == 0 else reversed(grid):
                f = measure(wire, case, port, inputs, args.keys, max_waiting_inputs=waiting)
                runs.setdefault((case.name, wire), []).append(f)
                limit = f"{f.limit:.0f}" if f.limit else "-"
                server = (
                    f"{f.server_cpu_ms_per_request:.3f}" if f.server_cpu_ms_per_request else "-"
                )
                collector = (
                    "-" if f.collector_ms_per_turn is None else f"{f.collector_ms_per_turn:.3f}"
                )
                print(
                    f"{case.name:<22} {wire:<24} {f.turns_per_s:8.1f} {f.mean_in_flight:10.1f} "
                    f"{f.max_in_flight:5d} {limit:>6} {f.tm_cpu_ms_per_turn:15.2f} "
                    f"{f.worker_cpu_ms_per_turn:15.2f} {server:>14} {collector:>11}",
                    flush=True,
                )
    if args.rounds > 1:
        print_medians(runs)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def print_medians(runs: dict[tuple[str, str], list[Figures]]) -> None:
    """The median turns/s and CPU per turn of each case and wire over the rounds, and what
    the event log at `standard` costs against `off` where both ran."""
    print(f"medians over {max(len(f) for f in runs.values())} rounds")
    print(f"{'case':<22} {'wire':<24} {'turns/s':>8} {'TM cpu ms/turn':>15} {'log: turns/s':>13}")
    for (name, wire), figures in runs.items():
        rate = statistics.median(f.turns_per_s for f in figures)
        cpu = statistics.median(f.tm_cpu_ms_per_turn for f in figures)
        cost = ""
        off = runs.get((name.replace("-standard", "-off"), wire))
        if name.endswith("-standard") and off:
            cost = f"{rate / statistics.median(f.turns_per_s for f in off) - 1:+.0%} vs off"
        print(f"{name:<22} {wire:<24} {rate:8.1f} {cpu:15.2f} {cost:>13}")


def scale_out(wires: Sequence[str], cases: Sequence[Case], inputs: int, keys: int) -> None:
    """The same runs on a standalone cluster of two TaskManagers, at parallelism 1 and 2."""
    print(
        f"standalone cluster, 2 TaskManagers x 1 slot; {inputs} inputs over {keys} keys; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'case':<22} {'wire':<24} {'p':>2} {'turns/s':>8} {'TM cpu ms/turn':>15} {'x p=1':>6}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-wire-cluster-"))
    try:
        with wire_server() as (port, _pid), StandaloneCluster(workdir, taskmanagers=2) as cluster:
            # An unmeasured job per wire at parallelism 2 first, so both TaskManagers have
            # paid their warm-up (imports, JIT): the second one's first job used to.
            for wire in wires:
                measure(wire, cases[0], port, min(inputs, 400), keys, cluster, parallelism=2)
            for case in cases:
                for wire in wires:
                    one = measure(wire, case, port, inputs, keys, cluster, parallelism=1)
                    two = measure(wire, case, port, inputs, keys, cluster, parallelism=2)
                    for p, f in ((1, one), (2, two)):
                        print(
                            f"{case.name:<22} {wire:<24} {p:>2} {f.turns_per_s:8.1f} "
                            f"{f.tm_cpu_ms_per_turn:15.2f} "
                            f"{f.turns_per_s / one.turns_per_s:6.2f}",
                            flush=True,
                        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
