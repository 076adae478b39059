"""Ending a job whose bounded input is held open, against Flink's REST API as served by a
loopback stub: when it counts as answered, and the draining stop that ends it."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.jobs.cluster import job_stop
from streamagents.jobs.cluster.job_stop import (
    StopError,
    finish_when_answered,
    input_answered,
    stop_with_savepoint,
)

JOB = "0123456789abcdef0123456789abcdef"


@dataclass
class FakeFlink:
    """A job as the REST API shows it: its state, its source's status, the agent's levels,
    and what a stop-with-savepoint answers."""

    state: str = "RUNNING"
    source: str = "RUNNING"
    levels: dict[str, int] = field(
        default_factory=lambda: {"in_flight": 0, "busy_keys": 0, "waiting_inputs": 0}
    )
    fetch_interval: str = "1000"
    reporting: tuple[int, ...] = (0, 1)  # the agent subtasks whose gauges are registered
    config_reads: int = 0
    job_reads: list[float] = field(default_factory=list)  # when the job details were read
    savepoint: dict[str, Any] | None = field(default_factory=lambda: {"location": "file:/sp/1"})
    history: list[dict[str, Any]] = field(default_factory=list)  # checkpoint statistics
    stops: list[Any] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> StubReply | dict | list:
        path, _, query = request.path.partition("?")
        if path == "/jobmanager/config":
            self.config_reads += 1
            return [{"key": "metrics.fetcher.update-interval", "value": self.fetch_interval}]
        if path == f"/jobs/{JOB}":
            self.job_reads.append(time.monotonic())
            vertices = [
                {"id": "src", "name": "Source: source -> job-parse", "status": self.source},
                {"id": "hold", "name": "Source: input-end-hold -> x", "status": "RUNNING"},
                {"id": "agent", "name": "job-agent", "status": "RUNNING", "parallelism": 2},
            ]
            return {"state": self.state, "vertices": vertices}
        if path == f"/jobs/{JOB}/stop":
            self.stops.append(request.json)
            return {"request-id": "t1"}
        if path == f"/jobs/{JOB}/checkpoints":
            return {"history": self.history}
        if path == f"/jobs/{JOB}/savepoints/t1":
            if self.savepoint is None:  # a stop that does not finish
                return {"status": {"id": "IN_PROGRESS"}}
            self.state = "FINISHED"
            return {"status": {"id": "COMPLETED"}, "operation": self.savepoint}
        if path == f"/jobs/{JOB}/vertices/agent/metrics":
            names = [
                f"{n}.job-agent.streamagents.{level}"
                for n in self.reporting
                for level in self.levels
            ]
            if not query:
                return StubReply([{"id": name} for name in names])
            return StubReply(
                [{"id": name, "value": str(self.levels[name.rsplit(".", 1)[1]])} for name in names]
            )
        return StubReply([])


def test_answered_only_when_the_source_finished_and_the_agent_is_idle() -> None:
    flink = FakeFlink()
    with LoopbackStubServer(flink) as stub:
        address = f"127.0.0.1:{stub.port}"
        assert not input_answered(address, JOB)  # the source still reads
        flink.source = "FINISHED"
        flink.levels["waiting_inputs"] = 3
        assert not input_answered(address, JOB)  # inputs wait in keyed state
        flink.levels["waiting_inputs"] = 0
        assert input_answered(address, JOB)
        flink.state = "RESTARTING"
        assert not input_answered(address, JOB)


def test_not_answered_while_a_subtask_of_the_agent_reports_no_gauges_yet() -> None:
    flink = FakeFlink(source="FINISHED", reporting=(0,))
    with LoopbackStubServer(flink) as stub:
        address = f"127.0.0.1:{stub.port}"
        assert not input_answered(address, JOB)  # subtask 1 may still hold work
        flink.reporting = (0, 1)
        assert input_answered(address, JOB)


def test_an_answered_job_is_stopped_with_a_draining_savepoint_after_a_quiet_period() -> None:
    flink = FakeFlink(fetch_interval="300 ms")
    announced = threading.Event()
    with LoopbackStubServer(flink) as stub:
        address = f"127.0.0.1:{stub.port}"
        done = threading.Event()
        result: list[str | None] = []
        worker = threading.Thread(
            target=lambda: result.append(
                finish_when_answered(
                    address, JOB, "/tmp/sp", done, poll_s=0.05, announce=announced.set
                )
            )
        )
        worker.start()
        done.wait(0.5)
        assert flink.stops == []  # the source has not finished
        flink.source = "FINISHED"
        worker.join(10)
    assert result == ["file:/sp/1"] and announced.is_set()
    assert flink.stops == [
        {"targetDirectory": "file:///tmp/sp", "drain": True, "formatType": "CANONICAL"}
    ]


def _finish_in_background(flink: FakeFlink, address: str, **kwargs: Any) -> threading.Thread:
    """`finish_when_answered` for `flink`'s job on a thread (polling every 50 ms)."""
    worker = threading.Thread(
        target=finish_when_answered,
        args=(address, JOB, "/tmp/sp", threading.Event()),
        kwargs={"poll_s": 0.05, **kwargs},
    )
    worker.start()
    return worker


def test_idle_metrics_count_only_a_fetch_interval_after_the_source_was_seen_finished() -> None:
    # Metrics may have been fetched before the source's last records reached the agent.
    flink = FakeFlink(source="FINISHED")  # and the agent idle, from the start
    with LoopbackStubServer(flink) as stub:
        _finish_in_background(flink, f"127.0.0.1:{stub.port}", fetch_interval_s=0.3).join(10)
    assert len(flink.stops) == 1
    assert flink.job_reads[-1] - flink.job_reads[0] >= 0.3 + 2 * 0.05


def test_an_agent_idle_long_after_its_source_finished_is_stopped_at_once() -> None:
    # The quiet period runs from the source's finish, not from the agent's last answer:
    # waiting it out again after the answers only delayed every bounded job's end.
    flink = FakeFlink(source="FINISHED")
    flink.levels["in_flight"] = 2
    with LoopbackStubServer(flink) as stub:
        worker = _finish_in_background(flink, f"127.0.0.1:{stub.port}", fetch_interval_s=1.0)
        while not flink.job_reads or flink.job_reads[-1] - flink.job_reads[0] < 1.2:
            time.sleep(0.05)
        reads_before = len(flink.job_reads)
        flink.levels["in_flight"] = 0
        worker.join(10)
    assert len(flink.stops) == 1
    # The first reading of an idle agent ends it (waiting 1.1 s more took 5 reads or more).
    assert len(flink.job_reads) - reads_before <= 2


def test_a_run_that_set_the_fetch_interval_does_not_wait_on_the_jobmanager_for_it() -> None:
    # On a busy machine the JobManager's config may not answer in time, and the fallback
    # (10 s) then delayed every local run's end: run passes the interval it configured.
    flink = FakeFlink(source="FINISHED", fetch_interval="10000")
    with LoopbackStubServer(flink) as stub:
        location = finish_when_answered(
            f"127.0.0.1:{stub.port}",
            JOB,
            "/tmp/sp",
            threading.Event(),
            poll_s=0.05,
            fetch_interval_s=0.2,
        )
    assert location == "file:/sp/1" and flink.config_reads == 0


def test_finishing_gives_up_when_the_job_ends_first() -> None:
    flink = FakeFlink(state="FAILED", source="FINISHED")
    with LoopbackStubServer(flink) as stub:
        done = threading.Event()
        timer = threading.Timer(0.3, done.set)
        timer.start()
        location = finish_when_answered(f"127.0.0.1:{stub.port}", JOB, "/sp", done, poll_s=0.05)
    assert location is None and flink.stops == []


def test_a_failed_savepoint_is_an_error_with_its_cause() -> None:
    flink = FakeFlink(savepoint={"failure-cause": {"stack-trace": "Boom: disk full\n\tat x"}})
    with (
        LoopbackStubServer(flink) as stub,
        pytest.raises(StopError, match="savepoint failed: Boom: disk full"),
    ):
        stop_with_savepoint(f"127.0.0.1:{stub.port}", JOB, "/sp", drain=True, timeout_s=5)


def test_a_stop_that_does_not_finish_says_how_far_its_savepoint_got() -> None:
    flink = FakeFlink(savepoint=None)
    flink.history = [
        {"id": 4, "is_savepoint": False, "status": "COMPLETED"},
        {
            "id": 5,
            "is_savepoint": True,
            "status": "IN_PROGRESS",
            "num_subtasks": 4,
            "num_acknowledged_subtasks": 3,
        },
    ]
    with (
        LoopbackStubServer(flink) as stub,
        pytest.raises(
            StopError,
            match=r"not finished after 1 s \(job RUNNING, savepoint 5 IN_PROGRESS: 3 of 4 "
            r"subtasks acknowledged\)",
        ),
    ):
        stop_with_savepoint(f"127.0.0.1:{stub.port}", JOB, "/sp", drain=False, timeout_s=1)


def _stop_in_background(address: str, target: Path) -> tuple[threading.Thread, list[Any]]:
    """`stop_with_savepoint` on a thread; its result (location or error) lands in the list."""
    result: list[Any] = []

    def stop() -> None:
        try:
            result.append(stop_with_savepoint(address, JOB, str(target), drain=False, timeout_s=60))
        except StopError as error:
            result.append(error)

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    return thread, result


def test_a_stop_whose_local_cluster_ends_before_it_is_seen_complete_finds_its_savepoint(
    tmp_path: Path,
) -> None:
    """`run`'s cluster ends with its job: the stop may complete between two polls and the
    REST API be gone at the next. The whole savepoint the stop wrote in the target is
    returned, as Flink names it, a couple of seconds later (not after the timeout)."""
    flink = FakeFlink(savepoint=None)
    with LoopbackStubServer(flink) as stub:
        thread, result = _stop_in_background(f"127.0.0.1:{stub.port}", tmp_path)
        while not flink.stops:
            time.sleep(0.01)
        made = tmp_path / f"savepoint-{JOB[:6]}-5e1f0a2b3c4d"
        made.mkdir()
        (made / "_metadata").write_bytes(b"\x00")
        (tmp_path / "savepoint-ffffff-000000000000").mkdir()  # another job's
        started = time.monotonic()
    thread.join(timeout=30)
    assert result == [f"file:{made}"]
    assert time.monotonic() - started < 10


def test_a_stop_whose_cluster_is_gone_without_a_savepoint_fails_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No answer and no whole savepoint of the job made since the stop (an older one, one
    without `_metadata`): an error naming the silence, without waiting out the timeout."""
    monkeypatch.setattr(job_stop, "_GIVE_UP_SILENT_S", 3.0)
    older = tmp_path / f"savepoint-{JOB[:6]}-0a0a0a0a0a0a"
    older.mkdir()
    (older / "_metadata").write_bytes(b"\x00")
    os.utime(older / "_metadata", (time.time() - 3600, time.time() - 3600))
    (tmp_path / f"savepoint-{JOB[:6]}-0b0b0b0b0b0b").mkdir()  # not whole: no _metadata
    flink = FakeFlink(savepoint=None)
    with LoopbackStubServer(flink) as stub:
        thread, result = _stop_in_background(f"127.0.0.1:{stub.port}", tmp_path)
        while not flink.stops:
            time.sleep(0.01)
    thread.join(timeout=30)
    assert len(result) == 1 and isinstance(result[0], StopError)
    assert "has not answered for 3 s" in str(result[0])
    assert f"no savepoint of it is in {tmp_path}" in str(result[0])
