"""Event log durability: interval flushes, finalizing torn in-progress files, reading them,
and a real PyFlink job stopped with a savepoint and then killed losing no flushed event."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import fastavro
import pytest

from streamagents.connectors.eventlog import (
    EventLogWriter,
    complete_length,
    event_log_files,
    finalize_in_progress,
    read_events,
)
from streamagents.jobs.cli.main import main
from streamagents.operators.flink.eventlog_sink import EventLogSinkFunction
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage

JOB = Path(__file__).parents[1] / "support" / "eventlog_durability_job.py"


def _events(count: int, start: int = 0) -> list[AgentEvent]:
    return [
        new_event(
            "output",
            job_id="durability",
            key=f"k{i % 3}",
            run_id=f"run-{i}",
            sequence=i,
            messages=[ChatMessage(role="assistant", content=f"answer {i}")],
        )
        for i in range(start, start + count)
    ]


def _in_progress(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.inprogress"))


@pytest.fixture()
def torn_log(tmp_path: Path) -> dict[str, object]:
    """A copy of an unclosed writer's file holding three flushed blocks of 5 events each,
    with the size of the file after each block, as a killed writer would leave it."""
    live = tmp_path / "live"
    writer = EventLogWriter(live, subtask=3, flush_seconds=3600, roll_seconds=7200)
    sizes = []
    for block in range(3):
        writer.write_all(_events(5, start=5 * block))
        writer.flush()
        sizes.append(_in_progress(live)[0].stat().st_size)
    (source,) = _in_progress(live)
    folder = tmp_path / "log"
    folder.mkdir()
    shutil.copy(source, folder / source.name)
    writer.close()
    return {"folder": folder, "file": folder / source.name, "sizes": sizes}


def test_buffered_events_are_flushed_as_a_block_once_flush_seconds_pass(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path, flush_seconds=5, roll_seconds=100)
    writer.write_all(_events(3))
    opened = writer.opened_at
    assert opened is not None
    assert list(read_events(tmp_path, include_in_progress=True)) == []
    writer.roll_if_due(now=opened + 4)
    assert list(read_events(tmp_path, include_in_progress=True)) == []
    writer.roll_if_due(now=opened + 5)
    assert len(list(read_events(tmp_path, include_in_progress=True))) == 3
    assert event_log_files(tmp_path) == []  # still in progress, not yet finished
    writer.close()


@pytest.mark.parametrize("cut", ["inside_block", "inside_sync_marker", "after_block"])
def test_a_torn_in_progress_file_is_cut_after_its_last_complete_block(
    torn_log: dict[str, object], cut: str
) -> None:
    file, sizes = torn_log["file"], torn_log["sizes"]
    assert isinstance(file, Path) and isinstance(sizes, list)
    length = {
        "inside_block": (sizes[1] + sizes[2]) // 2,
        "inside_sync_marker": sizes[2] - 1,
        "after_block": sizes[2],
    }[cut]
    os.truncate(file, length)
    (finished,) = finalize_in_progress(file.parent)
    assert finished.name == file.name[1 : -len(".inprogress")]
    assert not file.exists()
    kept = 15 if cut == "after_block" else 10
    assert finished.stat().st_size == (sizes[2] if kept == 15 else sizes[1])
    with open(finished, "rb") as handle:  # plain fastavro reads the result
        assert [r["sequence"] for r in fastavro.reader(handle)] == list(range(kept))


def test_an_in_progress_file_without_a_complete_header_is_removed(
    torn_log: dict[str, object],
) -> None:
    file = torn_log["file"]
    assert isinstance(file, Path)
    os.truncate(file, 20)
    assert complete_length(file) == 0
    assert finalize_in_progress(file.parent) == []
    assert list(file.parent.iterdir()) == []


def test_readers_take_complete_blocks_of_in_progress_files_only_when_asked(
    torn_log: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    file, sizes = torn_log["file"], torn_log["sizes"]
    assert isinstance(file, Path) and isinstance(sizes, list)
    os.truncate(file, sizes[2] - 3)
    assert list(read_events(file.parent)) == []
    events = list(read_events(file.parent, include_in_progress=True, typed=True))
    assert [e.sequence for e in events] == list(range(10))
    assert file.stat().st_size == sizes[2] - 3  # reading changes nothing
    assert main(["eventlog", "stats", str(file.parent), "--json"]) == 0
    assert '"events": 0' in capsys.readouterr().out
    assert main(["eventlog", "stats", str(file.parent), "--json", "--include-in-progress"]) == 0
    assert '"events": 10' in capsys.readouterr().out
    assert main(["eventlog", "cat", str(file.parent), "--include-in-progress"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 10


def test_finalize_takes_own_subtask_and_stale_files_but_not_live_ones(tmp_path: Path) -> None:
    writers = {
        name: EventLogWriter(tmp_path, subtask=index)
        for name, index in (("own", 0), ("live", 1), ("stale", 2))
    }
    for writer in writers.values():
        writer.write(_events(1)[0])
        writer.flush()
    stale = next(p for p in _in_progress(tmp_path) if "-0002-" in p.name)
    os.utime(stale, (time.time() - 700, time.time() - 700))
    finished = finalize_in_progress(tmp_path, subtask=0, stale_after=600)
    assert sorted(p.name.split("-")[2] for p in finished) == ["0000", "0002"]
    assert [p.name.split("-")[2] for p in _in_progress(tmp_path)] == ["0001"]
    writers["live"].close()
    assert len(event_log_files(tmp_path)) == 3


class SubtaskContextDouble:
    """Test double of a PyFlink runtime context: only the subtask index the sink asks for."""

    def __init__(self, index: int) -> None:
        self.index = index

    def get_index_of_this_subtask(self) -> int:
        return self.index


def test_a_restarted_sink_attempt_closes_the_one_it_replaces_and_its_flusher(
    tmp_path: Path,
) -> None:
    first, second = _events(3), _events(2, start=3)
    old = EventLogSinkFunction(str(tmp_path), "standard", 1 << 20, 600, flush_seconds=0.05)
    old.open(SubtaskContextDouble(1))  # type: ignore[arg-type]
    for event in first:
        old.process_element(event.model_dump_json(), None)  # type: ignore[arg-type]
    flusher = old._stop
    new = EventLogSinkFunction(str(tmp_path), "standard", 1 << 20, 600, flush_seconds=0.05)
    new.open(SubtaskContextDouble(1))  # type: ignore[arg-type]
    assert old.writer is None and flusher is not None and flusher.is_set()
    assert [e["sequence"] for e in read_events(tmp_path)] == [0, 1, 2]
    for event in second:
        new.process_element(event.model_dump_json(), None)  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while len(list(read_events(tmp_path, include_in_progress=True))) < 5:
        assert time.monotonic() < deadline, "the flusher did not write the block out"
        time.sleep(0.02)
    new.close()
    assert _in_progress(tmp_path) == []
    assert sorted(e["sequence"] for e in read_events(tmp_path)) == [0, 1, 2, 3, 4]


# --- a real PyFlink job, stopped with a savepoint, then restored and killed -----------------


def _start_job(folder: Path, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """Start the job in a subprocess; returns it with its job id and REST address."""
    command = [sys.executable, str(JOB), "--inputs", str(folder / "inputs")]
    job = subprocess.Popen(
        [*command, "--log", str(folder / "log"), *extra],
        env=dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert job.stdout is not None
    match = re.fullmatch(r"JOB ([0-9a-f]{32}) (\S+)\n", job.stdout.readline())
    assert match, "the job did not start"
    return job, match.group(1), match.group(2)


def _wait_for(job: subprocess.Popen[str], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 180
    while not done():
        assert job.poll() is None, "the job ended early"
        assert time.monotonic() < deadline, "the job did not get there in time"
        time.sleep(0.1)


def _ids(folder: Path, include_in_progress: bool = True) -> list[str]:
    if not folder.exists():
        return []
    return [r["event_id"] for r in read_events(folder, include_in_progress=include_in_progress)]


def _write_inputs(path: Path, events: list[AgentEvent]) -> None:
    path.write_text("".join(event.model_dump_json() + "\n" for event in events))


@pytest.mark.e2e
def test_flink_job_stopped_with_a_savepoint_then_killed_loses_no_flushed_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _events(40), _events(30, start=40)
    (tmp_path / "inputs").mkdir()
    _write_inputs(tmp_path / "inputs" / "first.jsonl", first)
    log = tmp_path / "log"

    job, job_id, address = _start_job(tmp_path)
    try:  # every event flushed by the background flusher, then `streamagents savepoint`
        _wait_for(job, lambda: len(_ids(log)) == len(first))
        target = str(tmp_path / "savepoints")
        stop = ["savepoint", job_id, "--jobmanager", address, "--target-dir", target]
        stopped = main([*stop, "--timeout", "120"])  # in-process: the same REST calls
        savepoint_path, stop_error = capsys.readouterr()
        assert stopped == 0, stop_error
        assert job.wait(timeout=120) == 0
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    # PyFlink calls no close() on a stop with a savepoint: the sink's task watch finishes its
    # files when the TaskManager outlives the task by a second, else they stay in progress;
    # either way every flushed event is readable
    stopped_files = {p.name for p in event_log_files(log)} | {
        p.name[1 : -len(".inprogress")] for p in _in_progress(log)
    }
    assert len(stopped_files) == 2
    assert sorted(_ids(log)) == sorted(e.event_id for e in first)

    _write_inputs(tmp_path / "inputs" / "second.jsonl", second)
    every_id = {e.event_id for e in first + second}
    job, _, _ = _start_job(tmp_path, "--restore", savepoint_path.strip())
    try:
        _wait_for(job, lambda: set(_ids(log)) >= every_id)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    # the stopped attempt's files are finished (by its watch, or by the restored open())
    assert {p.name for p in event_log_files(log)} == stopped_files
    finalize_in_progress(log)  # the killed attempt's files, as the next open() would
    assert _in_progress(log) == []
    assert set(_ids(log, include_in_progress=False)) == every_id
