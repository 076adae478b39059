"""The event-log sink: a real PyFlink job writes Avro files that plain fastavro reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from streamagents.operators.flink.eventlog_sink import invalid_record_event
from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage


def _events(count: int) -> list[AgentEvent]:
    return [
        new_event(
            "chat_response",
            job_id="sink-job",
            key=f"k{i % 7}",
            run_id=f"run-{i}",
            sequence=1,
            messages=[ChatMessage(role="assistant", content=f"answer {i} " + "z" * 3000)],
            usage=TokenUsage(input_tokens=i, output_tokens=1),
            latency_ms=float(i),
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def sink_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Runs one small PyFlink job (parallelism 2, thread mode) into an event log folder."""
    from pyflink.common import Configuration, Types
    from pyflink.datastream import StreamExecutionEnvironment

    from streamagents.operators.flink.eventlog_sink import sink_event_log

    directory = tmp_path_factory.mktemp("eventlog")
    events = _events(40)
    lines = [e.model_dump_json() for e in events] + ['{"not": "an event"}']
    config = Configuration()
    config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    stream = env.from_collection(lines, type_info=Types.STRING()).rebalance()
    sink_event_log(stream, str(directory), level="standard", roll_bytes=8192, roll_seconds=60)
    env.execute("eventlog-sink-test")
    return {"directory": directory, "events": events}


def _plain_records(directory: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(directory.glob("*.avro")):
        with open(path, "rb") as handle:
            records.extend(fastavro.reader(handle))
    return records


@pytest.mark.e2e
def test_flink_job_writes_every_event_readable_by_plain_fastavro(sink_job: dict[str, Any]) -> None:
    records = _plain_records(sink_job["directory"])
    written = {r["event_id"] for r in records if r["event_type"] == "chat_response"}
    assert written == {e.event_id for e in sink_job["events"]}
    text = records[0]["payload"]["messages"][0]["content"]
    assert text["truncated"] is True and len(text["text"]) == 2048


@pytest.mark.e2e
def test_flink_job_replaces_an_invalid_record_with_an_error_event(sink_job: dict[str, Any]) -> None:
    errors = [r for r in _plain_records(sink_job["directory"]) if r["event_type"] == "error"]
    assert len(errors) == 1
    assert errors[0]["payload"]["error_class"] == "InvalidEventRecord"
    assert errors[0]["payload"]["error_message"]["text"] == (
        "event log record rejected: job_id: Field required; payload: Field required; "
        "not: Extra inputs are not permitted"
    )


@pytest.mark.e2e
def test_flink_subtasks_write_distinct_rolled_files_and_leave_none_in_progress(
    sink_job: dict[str, Any],
) -> None:
    names = [p.name for p in sink_job["directory"].iterdir()]
    assert not any(name.endswith(".inprogress") for name in names)
    assert {name.split("-")[2] for name in names} == {"0000", "0001"}
    assert len(names) > 2  # rolled by size


def _stand_in_for(raw: str) -> dict[str, Any]:
    """The error event the sink writes in place of `raw`, which AgentEvent refuses."""
    with pytest.raises(ValueError) as info:
        AgentEvent.model_validate_json(raw)
    return json.loads(invalid_record_event(raw, info.value))


def test_invalid_record_event_names_the_reason_and_keeps_the_job_id() -> None:
    event = _stand_in_for('{"job_id": "j1", "event_type": "input", "sequence": -1}')
    assert event["job_id"] == "j1"
    assert event["payload"]["error_message"] == (
        "event log record rejected: sequence: Input should be greater than or equal to 0"
    )


def test_invalid_json_is_reported_without_its_content() -> None:
    event = _stand_in_for('{"job_id": "j1", "secret": "AIza-oops')
    assert event["job_id"] == "unknown"
    assert "AIza" not in event["payload"]["error_message"]


class _Subtask:
    """The one runtime-context method the sink function asks for."""

    def get_index_of_this_subtask(self) -> int:
        return 0


def test_a_sink_whose_task_thread_ends_without_close_finishes_its_file(tmp_path: Path) -> None:
    """As when a task is cancelled or fails: PyFlink's thread mode then calls no `close()`,
    and the sink's watch must finish the open file so that readers see its events."""
    import threading
    import time

    from streamagents.operators.flink.eventlog_sink import EventLogSinkFunction

    sink = EventLogSinkFunction(str(tmp_path), "standard", roll_bytes=1 << 20, roll_seconds=300)
    event = _events(1)[0]

    def task() -> None:
        sink.open(_Subtask())  # type: ignore[arg-type]
        sink.write_events([event])

    thread = threading.Thread(target=task)
    thread.start()
    thread.join()
    deadline = time.monotonic() + 10
    while list(tmp_path.glob(".*.inprogress")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(tmp_path.glob(".*.inprogress")), "the file was left in progress"
    assert [r["event_id"] for r in _plain_records(tmp_path)] == [event.event_id]
    assert sink.writer is None
