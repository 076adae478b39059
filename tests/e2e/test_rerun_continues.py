"""Rerun to continue, on files: `streamagents run` stopped with the `streamagents savepoint`
command it printed, a part of the way through a folder of inputs; the same command again
continues from that savepoint and says so; killed (`kill -9`) there, the same command once
more continues from the job's latest retained checkpoint, says so, and finishes: every
input answered once, none twice, and the stopped run's answers all in the event log.

One sequence of three `run`s (a module fixture); each test asserts one behaviour of it."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_jobs import CLI, demo_env, savepoint, start_run, wait_for
from rerun_jobs import kill_run, paced_spec, questions

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.files import read_jsonl

# the first test's setup runs three runs: over 600 s on a loaded machine
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

INPUTS = 120
"""Inputs: at 2 calls in flight and the paced responder's pause, about 15 s of work, so
that the stop (a CLI command) lands part way even when a loaded machine is slow to run it."""


@dataclass
class Reruns:
    """What the sequence saw: the spec, each run's job id and words, and the answers."""

    spec: Path
    savepoint: str
    stopped_exit: int
    answered_at_stop: list[dict[str, Any]]
    in_progress_at_stop: list[Path]
    logged_at_stop: set[str]
    continued_log: str
    killed_job: str
    checkpoints_at_kill: list[Path]
    answered_at_kill: int
    last: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def reruns(tmp_path_factory: pytest.TempPathFactory) -> Reruns:
    """Run and stop it with the printed savepoint command; run again and kill -9 it; run
    again to the end."""
    tmp_path = tmp_path_factory.mktemp("reruns")
    inputs = tmp_path / "job" / "inputs"
    inputs.mkdir(parents=True)
    (inputs / "questions.jsonl").write_text("".join(line + "\n" for _, line in questions(INPUTS)))
    spec = paced_spec(
        tmp_path / "job",
        "rerun-files",
        {"files": {"path": "inputs"}},
        {"outputs": {"path": "out/answers"}, "dead_letters": {"path": "out/dead"}},
    )
    logged = {"event_log": {"path": "out/events", "level": "standard"}}
    spec.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), **logged}, sort_keys=False))
    answers, events = spec.parent / "out" / "answers", spec.parent / "out" / "events"
    process, job_id, address = start_run(spec, tmp_path / "first.log")
    try:
        printed = re.search(r"--target-dir (\S+)", (tmp_path / "first.log").read_text())
        assert printed is not None
        wait_for(lambda: read_jsonl(answers), 600)
        location = savepoint(job_id, address, Path(printed.group(1)))
        stopped_exit = process.wait(timeout=300)
    finally:
        process.kill()
    answered_at_stop = read_jsonl(answers)
    in_progress_at_stop = list(events.glob(".*.inprogress"))
    logged_at_stop = {e["run_id"] for e in read_events(events) if e["event_type"] == "output"}

    process, killed_job, _ = start_run(spec, tmp_path / "second.log")
    try:
        continued_log = (tmp_path / "second.log").read_text()
        # answers committed after the restore: a checkpoint of this run has completed
        wait_for(lambda: len(read_jsonl(answers)) > len(answered_at_stop), 600)
    finally:
        kill_run(process)
    job_folder = spec.parent / ".streamagents" / "rerun-files" / "rerun-files"
    checkpoints_at_kill = list((job_folder / "checkpoints" / killed_job).glob("chk-*/_metadata"))
    answered_at_kill = len(read_jsonl(answers))

    last = subprocess.run(
        [*CLI, "run", str(spec), "--progress-interval", "0.5"],
        env=demo_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    return Reruns(
        spec=spec,
        savepoint=location,
        stopped_exit=stopped_exit,
        answered_at_stop=answered_at_stop,
        in_progress_at_stop=in_progress_at_stop,
        logged_at_stop=logged_at_stop,
        continued_log=continued_log,
        killed_job=killed_job,
        checkpoints_at_kill=checkpoints_at_kill,
        answered_at_kill=answered_at_kill,
        last=last,
    )


def test_stop_with_the_printed_savepoint_command_then_run_again_continues_and_repeats_none(
    reruns: Reruns,
) -> None:
    assert reruns.stopped_exit == 0
    location = reruns.savepoint
    assert location.startswith("file:") and Path(location[5:]).exists()
    job_folder = reruns.spec.parent / ".streamagents" / "rerun-files" / "rerun-files"
    assert Path(location[5:]).parent == job_folder / "savepoints"
    assert 0 < len(reruns.answered_at_stop) < INPUTS, "the run was to be stopped part way"
    assert reruns.in_progress_at_stop == [], "run finishes the log files of a stopped job"
    # every answer committed by the stop is in the finished log files (runs in flight at the
    # stop may be logged too: they are performed again after it)
    assert reruns.logged_at_stop >= {r["run_id"] for r in reruns.answered_at_stop}
    said = reruns.continued_log
    assert "continuing from the savepoint the previous run" in said, said[:3000]
    assert Path(location[5:]).name in said
    answers = read_jsonl(reruns.spec.parent / "out" / "answers")
    assert Counter(r["id"] for r in answers) == Counter(f"in-{n:03d}" for n in range(INPUTS))


def test_a_killed_run_continues_when_run_again_and_answers_each_input_once(
    reruns: Reruns,
) -> None:
    assert reruns.answered_at_kill < INPUTS, "the second run was to be killed part way"
    assert reruns.checkpoints_at_kill, "the killed run retained no checkpoint"
    last = reruns.last
    assert last.returncode == 0, last.stdout[-3000:] + last.stderr[-3000:]
    said = re.search(
        r"continuing from checkpoint (\d+) of the previous run \(job (\w+);", last.stdout
    )
    assert said is not None, last.stdout[:3000]
    assert said.group(2) == reruns.killed_job
    assert "rerun-files: FINISHED" in last.stdout
    ids = Counter(record["id"] for record in read_jsonl(reruns.spec.parent / "out" / "answers"))
    assert sorted(ids) == [f"in-{n:03d}" for n in range(INPUTS)]
    assert set(ids.values()) == {1}
    assert read_jsonl(reruns.spec.parent / "out" / "dead") == []
