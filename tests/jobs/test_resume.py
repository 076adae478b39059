"""Rerun to continue: what the next `run` of a job continues from, as its folder records it,
and which checkpoints are kept (the checkpoints are folders as Flink lays them out)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.jobs.cli.main import main
from streamagents.jobs.cluster.resume import Attempt, JobFolder, latest_checkpoint, plan_start
from streamagents.jobs.spec import load_spec

JOB_A = "a" * 32
JOB_B = "b" * 32


def checkpoint(root: Path, job_id: str, number: int, *, complete: bool = True) -> Path:
    """A checkpoint folder as Flink writes it: `<root>/<job>/chk-N`, with `_metadata` once
    it completed."""
    folder = root / job_id / f"chk-{number}"
    folder.mkdir(parents=True)
    if complete:
        (folder / "_metadata").write_bytes(b"state")
    return folder


def folder_with(tmp_path: Path, *attempts: Attempt) -> JobFolder:
    folder = JobFolder(tmp_path / "job")
    for attempt in attempts:
        folder.begin(attempt)
    return folder


def test_a_job_never_run_starts_from_the_beginning_without_a_word(tmp_path: Path) -> None:
    start = plan_start(JobFolder(tmp_path / "job"), "digest")
    assert (start.restore_from, start.message, start.refusal) == (None, None, None)


def test_a_run_whose_process_died_continues_from_its_latest_completed_checkpoint(
    tmp_path: Path,
) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoint(checkpoints, JOB_A, 4)
    latest = checkpoint(checkpoints, JOB_A, 5)
    checkpoint(checkpoints, JOB_A, 6, complete=False)  # in progress when the process died
    folder = folder_with(tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints)))
    start = plan_start(folder, "")
    assert start.restore_from == str(latest)
    assert start.message is not None
    assert start.message.startswith(
        f"continuing from checkpoint 5 of the previous run (job {JOB_A}"
    )
    assert "its process ended without stopping it" in start.message
    assert "--fresh starts over" in start.message


def test_a_cancelled_or_failed_run_continues_too(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    latest = checkpoint(checkpoints, JOB_A, 2)
    folder = folder_with(tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints)))
    for ending, said in (("canceled", "it was cancelled"), ("failed", "it failed")):
        folder.end(JOB_A, ending)  # type: ignore[arg-type]
        start = plan_start(folder, "")
        assert start.restore_from == str(latest)
        assert start.message is not None and said in start.message


def test_a_run_that_died_before_its_first_checkpoint_continues_from_where_it_started(
    tmp_path: Path,
) -> None:
    checkpoints = tmp_path / "checkpoints"
    first = checkpoint(checkpoints, JOB_A, 7)
    folder = folder_with(
        tmp_path,
        Attempt(job_id=JOB_A, checkpoints=str(checkpoints)),
        Attempt(job_id=JOB_B, checkpoints=str(checkpoints), restored_from=str(first)),
    )
    assert first.exists()  # the run it continued keeps its checkpoint
    assert plan_start(folder, "").restore_from == str(first)


def test_a_finished_run_is_not_continued_and_its_checkpoints_are_deleted(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoint(checkpoints, JOB_A, 3)
    folder = folder_with(tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints)))
    folder.end(JOB_A, "finished")
    start = plan_start(folder, "")
    assert (start.restore_from, start.message) == (None, None)
    assert not (checkpoints / JOB_A).exists()


def test_a_run_stopped_with_a_savepoint_continues_from_that_savepoint(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoint(checkpoints, JOB_A, 3)  # older than the savepoint: never restored
    folder = folder_with(tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints)))
    folder.end(JOB_A, "stopped", "file:/sp/savepoint-aaaaaa-1")
    start = plan_start(folder, "")
    assert start.restore_from == "file:/sp/savepoint-aaaaaa-1"
    assert start.message is not None and "stopped with" in start.message


def test_a_stop_whose_savepoint_was_not_seen_is_refused_rather_than_guessed(
    tmp_path: Path,
) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoint(checkpoints, JOB_A, 3)
    folder = folder_with(tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints)))
    folder.end(JOB_A, "stopped")
    start = plan_start(folder, "")
    assert start.restore_from is None
    assert start.refusal is not None
    assert "--from-savepoint" in start.refusal and "--fresh" in start.refusal


def test_a_changed_spec_is_said_when_continuing(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    checkpoint(checkpoints, JOB_A, 1)
    folder = folder_with(
        tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints), spec_sha256="before")
    )
    changed = plan_start(folder, "after").message
    assert changed is not None and "the spec changed since that run" in changed
    same = plan_start(folder, "before").message
    assert same is not None and "the spec changed" not in same


def test_a_new_run_deletes_only_recorded_checkpoints_it_does_not_continue(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    old = checkpoint(checkpoints, JOB_A, 1)
    continued = checkpoint(checkpoints, JOB_B, 2)
    stranger = checkpoint(checkpoints, "c" * 32, 9)  # not a run of this record
    folder = folder_with(
        tmp_path,
        Attempt(job_id=JOB_A, checkpoints=str(checkpoints)),
        Attempt(job_id=JOB_B, checkpoints=str(checkpoints), restored_from=str(old)),
    )
    folder.begin(
        Attempt(job_id="d" * 32, checkpoints=str(checkpoints), restored_from=str(continued))
    )
    assert not old.exists() and continued.exists() and stranger.exists()
    assert [a.job_id for a in folder.attempts()] == [JOB_B, "d" * 32]


def test_fresh_forgets_the_runs_and_deletes_their_checkpoints(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    made = checkpoint(checkpoints, JOB_A, 1)
    folder = folder_with(tmp_path, Attempt(job_id=JOB_A, checkpoints=str(checkpoints)))
    folder.forget()
    assert folder.attempts() == [] and not made.exists()
    assert plan_start(folder, "").restore_from is None


def test_an_unreadable_record_counts_as_no_run(tmp_path: Path) -> None:
    folder = JobFolder(tmp_path / "job")
    folder.root.mkdir(parents=True)
    (folder.root / "attempts.json").write_text("{not json")
    assert folder.attempts() == []


@settings(deadline=None, max_examples=50)  # file system work: no timing
@given(st.dictionaries(st.integers(0, 40), st.booleans(), max_size=8))
def test_the_latest_checkpoint_is_the_highest_completed_one(chks: dict[int, bool]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for number, complete in chks.items():
            checkpoint(root, JOB_A, number, complete=complete)
        (root / JOB_A / "shared").mkdir(parents=True)  # Flink's other folders are not chk-N
        completed = [n for n, complete in chks.items() if complete]
        expected = str(root / JOB_A / f"chk-{max(completed)}") if completed else None
        assert latest_checkpoint(str(root), JOB_A) == expected
        assert latest_checkpoint(root.as_uri(), JOB_A) == (
            None if expected is None else Path(expected).as_uri()
        )


SPEC = """\
name: resumable
source: {files: {path: in}}
key: customer.id
agent:
  model: {provider: demo, model: d, responder: "streamagents.jobs.examples.demo_responder:respond"}
sinks: {outputs: {path: out/answers}, dead_letters: {path: out/dead}}
"""


def test_run_refuses_to_guess_after_a_stop_whose_savepoint_it_did_not_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # `run` puts its interpreter first
    spec = tmp_path / "resumable.yaml"
    spec.write_text(SPEC)
    folder = JobFolder.of(load_spec(spec, {}))
    assert folder.root == tmp_path / ".streamagents" / "resumable" / "resumable"
    folder.begin(Attempt(job_id=JOB_A, checkpoints=str(folder.default_checkpoints)))
    folder.end(JOB_A, "stopped")
    assert main(["run", str(spec)]) == 2  # before any Flink job starts
    refusal = capsys.readouterr().err
    assert f"job {JOB_A}) was stopped with a savepoint" in refusal
    assert "--from-savepoint PATH" in refusal and "--fresh" in refusal


def test_the_newest_complete_savepoint_of_the_job_is_found_where_the_stop_command_puts_it(
    tmp_path: Path,
) -> None:
    folder = JobFolder(tmp_path / "job")
    assert folder.newest_savepoint(JOB_A) is None
    for name, complete in (
        (f"savepoint-{JOB_A[:6]}-000000000001", True),
        (f"savepoint-{JOB_A[:6]}-000000000002", True),
        (f"savepoint-{JOB_A[:6]}-000000000003", False),  # still being written
        (f"savepoint-{JOB_B[:6]}-000000000004", True),  # another run's
    ):
        (folder.savepoints / name).mkdir(parents=True)
        if complete:
            (folder.savepoints / name / "_metadata").write_bytes(b"state")
            time.sleep(0.01)  # distinct modification times, oldest first
    assert folder.newest_savepoint(JOB_A) == str(
        folder.savepoints / f"savepoint-{JOB_A[:6]}-000000000002"
    )
