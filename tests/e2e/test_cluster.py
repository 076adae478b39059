"""The example job submitted to a real standalone Flink cluster (JobManager + 2 TaskManagers
on 127.0.0.1, started from the wheel's scripts) with `streamagents submit`.

One cluster for the module; the example's run on it with the demo model is one sequence
(a module fixture: submitted, stopped with a savepoint, resubmitted from it) that two tests
assert on; the submit with an API key is its own job."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.files import read_jsonl
from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.jobs.cluster.standalone import StandaloneCluster, rest_call
from streamagents.jobs.examples.demo_responder import respond

# Each test starts a standalone cluster (three JVMs, ready within 120 s) through the CLI:
# on a machine another worker keeps busy that start can time out, so they run alone.
pytestmark = pytest.mark.alone

EXAMPLES = Path(__file__).resolve().parents[2] / "jobs" / "examples"
CLI = str(Path(sys.executable).parent / "streamagents")


def cli(
    *args: str, timeout: float = 300, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "OPENAI_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra_env or {})
    return subprocess.run(
        [CLI, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, StandaloneCluster]]:
    """A cluster started with `streamagents cluster start`; always stopped, even on failure."""
    workdir = tmp_path_factory.mktemp("cluster")
    handle = StandaloneCluster(workdir)
    try:
        started = cli("cluster", "start", "--dir", str(workdir), timeout=180)
        assert started.returncode == 0, started.stdout + started.stderr
        address = re.search(r"http://(localhost:\d+)", started.stdout)
        assert address, started.stdout
        yield address.group(1), handle
    finally:
        cli("cluster", "stop", "--dir", str(workdir), timeout=120)
        handle.stop()
    assert handle.pids() == [], "cluster processes outlived the test"


@pytest.mark.e2e
def test_submit_returns_the_job_id_at_once_and_the_key_reaches_the_workers_unprinted(
    cluster: tuple[str, StandaloneCluster], tmp_path: Path
) -> None:
    address, _ = cluster
    secret = "AIza-cluster-secret-never-printed"
    shutil.copytree(EXAMPLES, tmp_path / "job", ignore=shutil.ignore_patterns("out"))
    spec = tmp_path / "job" / "support_tickets.yaml"
    with LoopbackStubServer(respond) as stub:
        text = spec.read_text().replace(
            'options: {api_key: "${GEMINI_API_KEY}"}',
            'options: {api_key: "${GEMINI_API_KEY}", base_url: "' + stub.url + '"}',
        )
        spec.write_text(text)
        result = cli(
            "submit", str(spec), "--jobmanager", address, extra_env={"GEMINI_API_KEY": secret}
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert secret not in result.stdout + result.stderr
        assert "DEMO" not in result.stdout
        job_id = result.stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{32}", job_id), result.stdout
        deadline = time.monotonic() + 180
        while rest_call(address, f"/jobs/{job_id}")["state"] != "FINISHED":
            assert time.monotonic() < deadline, "job did not finish"
            time.sleep(1)
    keys = {request.headers.get("x-goog-api-key") for request in stub.requests}
    assert keys == {secret}
    outputs = read_jsonl(tmp_path / "job" / "out" / "support_tickets" / "answers")
    assert len(outputs) == 5 and all(r["status"] == "ok" for r in outputs)


@pytest.mark.e2e
def test_cluster_processes_are_gone_after_a_failing_block(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="test failed here"):  # noqa: SIM117
        with StandaloneCluster(tmp_path, taskmanagers=1) as started:
            pids = started.pids()
            assert len(pids) == 2
            raise RuntimeError("test failed here")
    assert started.pids() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def popen_cli(log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "OPENAI_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with log.open("w") as handle:
        return subprocess.Popen([CLI, *args], env=env, stdout=handle, stderr=subprocess.STDOUT)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.5)


@dataclass
class StoppedAndResumed:
    """The example submitted (demo model), stopped with a savepoint once its tickets are
    answered, resubmitted from it with one more ticket and stopped again."""

    folder: Path
    first_job: str
    first_exit: int
    at_first_stop: list[dict[str, Any]]
    dead_at_first_stop: list[dict[str, Any]]
    events_at_first_stop: list[dict[str, Any]]
    answers: list[dict[str, Any]]


@pytest.fixture(scope="module")
def stopped_and_resumed(
    cluster: tuple[str, StandaloneCluster], tmp_path_factory: pytest.TempPathFactory
) -> StoppedAndResumed:
    """Submit the example, stop it with a savepoint, resubmit it from there, stop it again."""
    address, _ = cluster
    tmp_path = tmp_path_factory.mktemp("resumed")
    shutil.copytree(EXAMPLES, tmp_path / "job", ignore=shutil.ignore_patterns("out"))
    spec = tmp_path / "job" / "support_tickets.yaml"
    spec.write_text(
        spec.read_text().replace(
            "    path: data/tickets", "    path: data/tickets\n    watch_interval_s: 0.5", 1
        )
    )
    out = tmp_path / "job" / "out" / "support_tickets"
    answers = out / "answers"

    def job_id(log: Path) -> str:
        wait_until(lambda: re.search(r"^[0-9a-f]{32}$", log.read_text(), re.MULTILINE) is not None)
        found = re.search(r"^([0-9a-f]{32})$", log.read_text(), re.MULTILINE)
        assert found
        return found.group(1)

    first = popen_cli(tmp_path / "first.log", "submit", str(spec), "--jobmanager", address)
    try:
        running = job_id(tmp_path / "first.log")
        wait_until(lambda: len(read_jsonl(answers)) == 5)
        stop = cli("savepoint", running, "--jobmanager", address, "--target-dir", str(tmp_path))
        assert stop.returncode == 0, stop.stderr
        first_exit = first.wait(timeout=120)
    finally:
        first.kill()
    at_first_stop = read_jsonl(answers)
    dead_at_first_stop = read_jsonl(out / "dead_letters")

    def logged_outputs() -> set[str]:
        events = read_events(out / "events", include_in_progress=True)
        return {e["run_id"] for e in events if e["event_type"] == "output"}

    # the stopped sink's files are finished by its task watch a second after the task ends
    wait_until(lambda: logged_outputs() >= {r["run_id"] for r in at_first_stop}, 60)
    events_at_first_stop = list(read_events(out / "events", include_in_progress=True))
    (tmp_path / "job" / "data" / "tickets" / "more.jsonl").write_text(
        '{"id": "T-3001", "customer": {"id": "C-17"}, "text": "Any news on O-5521?"}\n'
    )
    second = popen_cli(
        tmp_path / "second.log",
        *("submit", str(spec), "--jobmanager", address),
        *("--from-savepoint", stop.stdout.strip()),
    )
    try:
        resumed = job_id(tmp_path / "second.log")
        wait_until(lambda: len(read_jsonl(answers)) >= 6)
        again = cli("savepoint", resumed, "--jobmanager", address, "--target-dir", str(tmp_path))
        assert again.returncode == 0, again.stderr
        second.wait(timeout=120)
    finally:
        second.kill()
    return StoppedAndResumed(
        folder=tmp_path,
        first_job=running,
        first_exit=first_exit,
        at_first_stop=at_first_stop,
        dead_at_first_stop=dead_at_first_stop,
        events_at_first_stop=events_at_first_stop,
        answers=read_jsonl(answers),
    )


@pytest.mark.e2e
def test_submitted_example_runs_on_two_taskmanagers_and_writes_its_results(
    cluster: tuple[str, StandaloneCluster], stopped_and_resumed: StoppedAndResumed
) -> None:
    address, handle = cluster
    overview = rest_call(address, "/overview")
    assert overview["taskmanagers"] == 2 and overview["slots-total"] == 4  # 2 slots each
    assert len(handle.pids()) == 3
    job = rest_call(address, f"/jobs/{stopped_and_resumed.first_job}")
    assert job["state"] == "FINISHED"  # stopped with a savepoint: finished, not failed
    assert {v["parallelism"] for v in job["vertices"]} >= {2}
    outputs = stopped_and_resumed.at_first_stop
    assert sorted(r["id"] for r in outputs) == ["T-1001", "T-1002", "T-1003", "T-1004", "T-1005"]
    assert all(r["status"] == "ok" for r in outputs)
    assert len(stopped_and_resumed.dead_at_first_stop) == 2
    events = stopped_and_resumed.events_at_first_stop
    assert {e["run_id"] for e in events if e["event_type"] == "output"} == {
        r["run_id"] for r in outputs
    }


@pytest.mark.e2e
def test_cluster_job_stops_with_a_savepoint_and_resumes_from_it(
    stopped_and_resumed: StoppedAndResumed,
) -> None:
    assert stopped_and_resumed.first_exit == 0
    ids = sorted(r["id"] for r in stopped_and_resumed.answers)
    assert ids == ["T-1001", "T-1002", "T-1003", "T-1004", "T-1005", "T-3001"]
