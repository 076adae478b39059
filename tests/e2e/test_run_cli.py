"""`streamagents run` on the main example, from the venv without activating it: outputs, a
readable event log, dead letters; and a failing job's report. (Stopping `run` with the
`streamagents savepoint` command it prints and running it again: test_rerun_continues.py;
`--from-savepoint` itself: tests/kafka.) And `streamagents replay` of the recorded example
with its report."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_jobs import CLI, demo_env

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.files import read_jsonl
from streamagents.jobs.examples.demo_responder import DEMO_PREFIX

EXAMPLES = Path(__file__).resolve().parents[2] / "jobs" / "examples"


def copy_example(target: Path) -> Path:
    """A private copy of the example directory (its outputs land next to the spec)."""
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("out", "__pycache__"))
    return target / "support_tickets.yaml"


def run_to_end(
    spec: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`streamagents run SPEC` with the demo model, waited for."""
    return subprocess.run(
        [*CLI, "run", str(spec), "--progress-interval", "0.5"],
        env=env or demo_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


SYSTEM_PATH = os.pathsep.join(
    ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
)


def unactivated_env() -> dict[str, str] | None:
    """The demo environment as a shell that never activated the venv has it (the system's
    PATH, no VIRTUAL_ENV); None when that PATH holds no java and JAVA_HOME is unset."""
    env = {k: v for k, v in demo_env().items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    if not shutil.which("java", path=SYSTEM_PATH) and "JAVA_HOME" not in env:
        return None
    env["PATH"] = SYSTEM_PATH
    return env


@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The example run once to its end, by the venv's `streamagents` without activating the
    venv when the system has a java (else from the activated venv)."""
    spec = copy_example(tmp_path_factory.mktemp("example") / "job")
    env = unactivated_env()
    result = run_to_end(spec, env, cwd=spec.parent.parent)
    return {"result": result, "out": spec.parent / "out" / "support_tickets", "env": env}


@pytest.mark.e2e
def test_run_announces_the_demo_model_and_prints_progress_and_summary(
    example_run: dict[str, Any],
) -> None:
    result = example_run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    stdout = result.stdout
    assert "DEMO MODE" in stdout and "SCRIPTED TEST DOUBLE" in stdout
    assert re.search(r"job [0-9a-f]{32} \(support-tickets\) started", stdout)
    assert re.search(r"\] in \d+ \| finished", stdout), stdout
    assert "support-tickets: FINISHED" in stdout
    assert "answers       5 (5 ok, 0 error)" in stdout
    assert "dead letters  2" in stdout
    assert "DEMO - answers came from a scripted test double" in stdout


@pytest.mark.e2e
def test_every_ticket_is_answered_once_through_the_tools(example_run: dict[str, Any]) -> None:
    outputs = {r["id"]: r for r in read_jsonl(example_run["out"] / "answers")}
    assert sorted(outputs) == ["T-1001", "T-1002", "T-1003", "T-1004", "T-1005"]
    assert all(r["status"] == "ok" and r["text"].startswith(DEMO_PREFIX) for r in outputs.values())
    assert outputs["T-1001"]["key"] == "C-17"
    assert "media in the ticket: image/png" in outputs["T-1001"]["text"]
    assert "application/pdf received" in outputs["T-1002"]["text"]
    assert "image/png received" in outputs["T-1003"]["text"]
    assert "order O-7310 is paid" in outputs["T-1003"]["text"]
    assert "order O-9999 was not found" in outputs["T-1005"]["text"]
    assert outputs["T-1002"]["tool_calls"] == 2 and outputs["T-1002"]["model_calls"] == 2


@pytest.mark.e2e
def test_bad_tickets_become_dead_letters_with_their_reason(example_run: dict[str, Any]) -> None:
    dead = read_jsonl(example_run["out"] / "dead_letters")
    by_type = {d["error_type"]: d for d in dead}
    assert sorted(by_type) == ["InvalidJson", "MissingKey"]
    assert by_type["InvalidJson"]["stage"] == "parse"
    assert by_type["InvalidJson"]["input"].startswith('{"id":"T-1006"')
    assert by_type["MissingKey"]["id"] == "T-1007"


@pytest.mark.e2e
def test_event_log_tells_each_run_step_by_step(example_run: dict[str, Any]) -> None:
    events = list(read_events(example_run["out"] / "events"))
    runs: dict[str, list[str]] = {}
    for event in sorted(events, key=lambda e: (e["run_id"], e["sequence"])):
        runs.setdefault(event["run_id"], []).append(event["event_type"])
    assert len(runs) == 5
    for kinds in runs.values():
        assert kinds[0] == "input" and kinds[-1] == "output"
        assert {"chat_request", "chat_response", "tool_request", "tool_response"} <= set(kinds)
    cat = subprocess.run(
        [*CLI, "eventlog", "cat", str(example_run["out"] / "events")],
        env=demo_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "tool_request" in cat.stdout and "key=C-17" in cat.stdout


SYSTEM_PATH = os.pathsep.join(
    ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
)


@pytest.mark.e2e
def test_run_works_from_the_venv_without_activating_it(example_run: dict[str, Any]) -> None:
    env = example_run["env"]
    if env is None:
        pytest.skip("no system java")
    assert str(Path(sys.executable).parent) not in env["PATH"].split(os.pathsep)
    result = example_run["result"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "support-tickets: FINISHED" in result.stdout
    answers = read_jsonl(example_run["out"] / "answers")
    assert sorted(r["id"] for r in answers) == ["T-1001", "T-1002", "T-1003", "T-1004", "T-1005"]


@pytest.mark.e2e
def test_a_failing_job_reports_each_task_failure_and_exits_1(tmp_path: Path) -> None:
    spec = copy_example(tmp_path / "job")
    spec.write_text(
        spec.read_text().replace(
            "  path: out/support_tickets/events", "  path: /proc/no-such-dir/events"
        )
    )
    result = run_to_end(spec)
    assert result.returncode == 1
    assert "task failed, Flink restarts it:" in result.stdout
    assert "connectors/eventlog" in result.stdout
    assert "support-tickets: FAILED" in result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith("job failed: Caused by:")


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and modification time."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def _runs(events: Path) -> dict[str, dict[str, Any]]:
    """Per input id, from an event log: the run id, what it replays, its tool calls with
    arguments, its tool results' text and media digests."""
    found: dict[str, dict[str, Any]] = {}
    by_run: dict[str, dict[str, Any]] = {}
    for event in sorted(read_events(events, typed=True), key=lambda e: (e.run_id, e.sequence)):
        run = by_run.setdefault(
            event.run_id, {"run_id": event.run_id, "calls": [], "results": [], "replay_of": None}
        )
        payload = event.payload
        run["replay_of"] = payload.replay_of
        if payload.kind == "input":
            found[payload.input_id] = run
        elif payload.kind == "tool_request":
            run["calls"] += [(c.name, c.arguments) for c in payload.tool_calls]
        elif payload.kind == "tool_response":
            run["results"] += [
                (r.content, [p.ref.sha256 for p in r.media if p.ref is not None])
                for r in payload.tool_results
            ]
    return found


@pytest.mark.e2e
def test_replay_of_the_recorded_example_reproduces_it_and_writes_only_its_own_folder(
    example_run: dict[str, Any], tmp_path: Path
) -> None:
    out = example_run["out"]
    spec = out.parent.parent / "support_tickets.yaml"
    production = _files(out)
    result = subprocess.run(
        [*CLI, "replay", "--log", str(out / "events"), "--spec", str(spec), "--out",
         str(tmp_path / "replay"), "--parallelism", "2",
         "--fail-if", "changed_answers>0", "--fail-if", "tool_path_diverged>0",
         "--fail-if", "new_errors>0", "--fail-if", "missing>0"],
        env=demo_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "5 recorded runs, 5 chosen, 5 to replay, 0 not replayable" in result.stdout
    assert _files(out) == production  # the production sinks and event log were not written
    replay = tmp_path / "replay"
    assert (replay / "not_replayable.jsonl").read_text() == ""
    recorded = {r["id"]: r for r in read_jsonl(out / "answers")}
    replayed = {r["id"]: r for r in read_jsonl(replay / "outputs")}
    assert sorted(replayed) == sorted(recorded)
    for input_id, answer in replayed.items():
        assert (answer["text"], answer["status"], answer["key"]) == (
            recorded[input_id]["text"],
            recorded[input_id]["status"],
            recorded[input_id]["key"],
        )
    before, after = _runs(out / "events"), _runs(replay / "eventlog")
    assert sorted(after) == sorted(before)
    for input_id, run in after.items():
        assert run["run_id"].startswith("replay-")
        assert run["replay_of"] == before[input_id]["run_id"]
        assert run["calls"] == before[input_id]["calls"]  # tool calls with their arguments
        assert run["results"] == before[input_id]["results"]  # the image: the same media ref
    assert any(digests for run in after.values() for _, digests in run["results"])
    summary = json.loads((replay / "report" / "summary.json").read_text())
    assert (summary["inputs"], summary["compared"], summary["differing"]) == (5, 5, 0)
    assert (replay / "report" / "report.html").is_file()
