"""Event log files: plain Avro readers, schema resolution both ways, rolling, safety, levels."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
import pytest

from streamagents.connectors.eventlog import EventLogWriter, event_log_files, read_events
from streamagents.connectors.media import MediaStore
from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, EventType, RunEvent, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart, ToolCall

_GOOGLE_KEY = "AIzaSyD-" + "k" * 31
_OPENAI_KEY = "sk-proj-" + "s3cr3t" * 6


def _shipped_schema(version: int) -> dict[str, Any]:
    """A reader schema parsed by fastavro straight from the .avsc file in the package."""
    text = (
        resources.files("streamagents.serde")
        .joinpath("schemas", "eventlog", f"v{version}.avsc")
        .read_text(encoding="utf-8")
    )
    return fastavro.parse_schema(json.loads(text))


def _plain_read(path: Path, reader_schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        return list(fastavro.reader(handle, reader_schema=reader_schema))


def _run_events(key: str = "k1") -> list[AgentEvent]:
    ask = ChatMessage.user("What is in stock?")
    answer = ChatMessage(
        role="assistant",
        parts=[
            TextPart(
                text="checking",
                metadata={"thought_signature": b"\x00sig\xff", "trace": {"ids": [1, b"\x02"]}},
            )
        ],
        tool_calls=[
            ToolCall(id="c1", name="stock", arguments={"sku": "A1"}, metadata={"sig": b"\x01\x02"})
        ],
    )
    ids = {"job_id": "job", "key": key, "run_id": f"run-{key}"}
    return [
        new_event("input", sequence=0, messages=[ask], **ids),
        new_event(
            "chat_response",
            sequence=1,
            messages=[answer],
            tool_calls=answer.tool_calls,
            usage=TokenUsage(input_tokens=12, output_tokens=5, cached_tokens=4),
            model="gemini-2.5-flash",
            latency_ms=41.0,
            finish_reason="stop",
            attempts=2,
            interaction_id="int-2",
            continued_from="int-1",
            **ids,
        ),
        new_event(
            "tool_response",
            sequence=2,
            tool_results=[ChatMessage.tool_result("c1", "stock", "3 left", is_error=True)],
            **ids,
        ),
        new_event("budget_exceeded", sequence=3, error_class="BudgetExceeded", **ids),
    ]


def test_plain_fastavro_reader_reads_a_file_without_streamagents_code(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path) as writer:
        writer.write_all(_run_events())
    (path,) = writer.finished
    records = _plain_read(path)
    assert [r["event_type"] for r in records] == [
        "input",
        "chat_response",
        "tool_response",
        "budget_exceeded",
    ]
    assert records[1]["payload"]["usage"] == {
        "input_tokens": 12,
        "output_tokens": 5,
        "cached_tokens": 4,
    }
    assert records[1]["payload"]["tool_calls"][0]["metadata"] == {"sig": {"bytes": b"\x01\x02"}}
    assert records[2]["payload"]["tool_results"][0]["is_error"] is True


def test_v1_reader_reads_v2_files(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path, version=2) as writer:
        writer.write_all(_run_events())
    records = _plain_read(writer.finished[0], _shipped_schema(1))
    assert [r["event_type"] for r in records] == [
        "input",
        "chat_response",
        "tool_response",
        "unknown",  # budget_exceeded is a v2 symbol; v1 readers fall back to the default
    ]
    assert "finish_reason" not in records[1]["payload"]
    assert "metadata" not in records[1]["payload"]["tool_calls"][0]
    assert records[1]["payload"]["model"] == "gemini-2.5-flash"


def test_v2_reader_reads_v1_files(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path, version=1) as writer:
        writer.write_all(_run_events())
    records = _plain_read(writer.finished[0], _shipped_schema(2))
    assert records[3]["event_type"] == "unknown"  # v1 had no budget_exceeded symbol
    assert records[1]["payload"]["finish_reason"] is None
    assert records[1]["payload"]["attempts"] is None
    assert records[1]["payload"]["tool_calls"][0]["metadata"] == {}
    assert records[1]["payload"]["messages"][0]["parts"][0]["metadata"] == {}


def test_v2_reader_reads_v3_files_without_the_interaction_fields(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path, version=3) as writer:
        writer.write_all(_run_events())
    records = _plain_read(writer.finished[0], _shipped_schema(2))
    assert "interaction_id" not in records[1]["payload"]
    assert records[1]["payload"]["attempts"] == 2


def test_v3_reader_reads_v2_files_with_null_interaction_fields(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path, version=2) as writer:
        writer.write_all(_run_events())
    records = _plain_read(writer.finished[0], _shipped_schema(3))
    assert records[1]["payload"]["interaction_id"] is None
    assert records[1]["payload"]["continued_from"] is None
    assert records[1]["payload"]["attempts"] == 2


def test_v3_records_the_interaction_and_the_continuation(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path, version=3) as writer:
        writer.write_all(_run_events())
    payload = _plain_read(writer.finished[0])[1]["payload"]
    assert (payload["interaction_id"], payload["continued_from"]) == ("int-2", "int-1")


def test_read_events_resolves_files_of_every_version_to_the_requested_one(
    tmp_path: Path,
) -> None:
    for version in (1, 2, 3, 4, 5):
        with EventLogWriter(tmp_path, version=version, prefix=f"v{version}") as writer:
            writer.write_all(_run_events(key=f"k{version}"))
    newest = list(read_events(tmp_path))
    oldest = list(read_events(tmp_path, version=1))
    assert len(newest) == len(oldest) == 20
    cached = sorted(r["payload"]["usage"]["cached_tokens"] for r in newest if r["payload"]["usage"])
    assert cached == [0, 0, 0, 4, 4]  # files of v1-v3 lack the field: it takes its default
    assert all("continued_from" in r["payload"] for r in newest)
    assert not any("cost_usd" in r["payload"] for r in oldest)


def test_typed_read_gives_back_the_events_written_verbose(tmp_path: Path) -> None:
    events = _run_events()
    with EventLogWriter(tmp_path, level="verbose") as writer:
        writer.write_all(events)
    assert list(read_events(tmp_path, typed=True)) == events


def test_standard_level_truncates_text_without_changing_types(tmp_path: Path) -> None:
    long_text = "x" * 5000
    event = new_event(  # of no known type: one event with messages and an error message
        "unknown", job_id="j", key="k", run_id="r", sequence=0,
        messages=[ChatMessage.user(long_text), ChatMessage.user("short")],
        error_message=long_text,
    )  # fmt: skip
    with EventLogWriter(tmp_path, level="standard", text_limit=100) as writer:
        writer.write(event)
    (record,) = _plain_read(writer.finished[0])
    long_content, short_content = (m["content"] for m in record["payload"]["messages"])
    assert long_content == {"text": "x" * 100, "original_length": 5000, "truncated": True}
    assert short_content == {"text": "short", "original_length": 5, "truncated": False}
    assert record["payload"]["error_message"]["truncated"] is True


def test_verbose_level_keeps_full_text(tmp_path: Path) -> None:
    event = new_event(
        "input", job_id="j", key="k", run_id="r", sequence=0,
        messages=[ChatMessage.user("y" * 5000)],
    )  # fmt: skip
    with EventLogWriter(tmp_path, level="verbose", text_limit=100) as writer:
        writer.write(event)
    (record,) = _plain_read(writer.finished[0])
    assert record["payload"]["messages"][0]["content"]["text"] == "y" * 5000


def test_off_level_writes_no_file(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path / "log", level="off") as writer:
        writer.write_all(_run_events())
    assert not (tmp_path / "log").exists()


def test_files_never_hold_media_bytes_or_api_keys(tmp_path: Path) -> None:
    pixels = b"\x89PNG\r\n" + b"private-pixels-" * 100
    store = MediaStore(str(tmp_path / "media"))
    user = ChatMessage.user([TextPart(text="look"), ImagePart(mime_type="image/png", data=pixels)])
    offloaded = store.offload(user, threshold_bytes=0)
    event = new_event(  # of no known type: messages, an error and attributes in one event
        "unknown",
        job_id="j",
        key="k",
        run_id="r",
        sequence=1,
        messages=[offloaded, ChatMessage.user(f"my key is {_OPENAI_KEY}")],
        error_class="PermissionDenied",
        error_message=f"403 for https://x/v1?key={_GOOGLE_KEY} Authorization: Bearer {_OPENAI_KEY}",
        attributes={"header": f"x-goog-api-key: {_GOOGLE_KEY}"},
    )
    with EventLogWriter(tmp_path / "log", level="verbose", codec="null") as writer:
        writer.write(event)
    raw = writer.finished[0].read_bytes()
    assert b"private-pixels" not in raw
    assert _GOOGLE_KEY.encode() not in raw
    assert b"s3cr3t" not in raw
    (record,) = _plain_read(writer.finished[0])
    image = record["payload"]["messages"][0]["parts"][1]
    assert image["sha256"] == offloaded.parts[1].ref.sha256
    assert image["size_bytes"] == len(pixels)
    assert "[REDACTED]" in record["payload"]["error_message"]["text"]


def test_writer_refuses_event_json_that_holds_inline_media(tmp_path: Path) -> None:
    event = json.loads(_run_events()[0].model_dump_json())
    event["payload"]["messages"][0] = {
        "role": "user",
        "parts": [{"kind": "image", "mime_type": "image/png", "data": "cGl4ZWxz"}],
    }
    with EventLogWriter(tmp_path) as writer, pytest.raises(ValueError, match="offload it first"):
        writer.write(json.dumps(event))
    assert writer.finished == []


def test_a_batch_replaces_an_invalid_event_or_stops_at_it_keeping_the_ones_before(
    tmp_path: Path,
) -> None:
    first, second = _run_events()[:2]
    stand_in = new_event("error", job_id="j", key=None, run_id=None, sequence=0)
    seen: list[tuple[Any, str]] = []

    def replace(value: Any, error: ValueError) -> AgentEvent:
        seen.append((value, type(error).__name__))
        return stand_in

    with EventLogWriter(tmp_path / "replaced") as writer:
        writer.write_all([first, "{not json", second.model_dump_json()], invalid=replace)
    assert seen == [("{not json", "ValidationError")]
    ids = [r["event_id"] for r in read_events(tmp_path / "replaced")]
    assert ids == [first.event_id, stand_in.event_id, second.event_id]
    with EventLogWriter(tmp_path / "stopped") as writer, pytest.raises(ValueError):
        writer.write_all([first, "{not json", second])
    assert [r["event_id"] for r in read_events(tmp_path / "stopped")] == [first.event_id]


def test_the_sink_logs_a_runtime_event_holding_inline_media_as_an_error_event(
    tmp_path: Path,
) -> None:
    from streamagents.operators.flink.eventlog_sink import invalid_record_event

    pixels = ImagePart(mime_type="image/png", data=b"\x89PNG-secret-pixels")
    made = RunEvent.of(_run_events()[0])
    made.payload = type(made.payload).model_construct(  # past the payload's own refusal
        messages=[ChatMessage.user([TextPart(text="x"), pixels])]
    )
    with EventLogWriter(tmp_path, codec="null") as writer:  # uncompressed: bytes searchable
        writer.write_all([made], invalid=invalid_record_event)
    (record,) = read_events(tmp_path)
    assert (record["event_type"], record["job_id"]) == ("error", made.job_id)
    assert record["payload"]["error_class"] == "InvalidEventRecord"
    assert "offload it first" in record["payload"]["error_message"]["text"]
    assert b"secret-pixels" not in b"".join(p.read_bytes() for p in writer.finished)


def test_files_roll_by_size_and_keep_every_event_in_order(tmp_path: Path) -> None:
    events = [e for k in range(60) for e in _run_events(key=f"k{k}")]
    with EventLogWriter(tmp_path, roll_bytes=4096, codec="null") as writer:
        writer.write_all(events)
    assert len(writer.finished) > 3
    assert [r["event_id"] for r in read_events(tmp_path)] == [e.event_id for e in events]


def test_files_roll_by_time(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path, roll_seconds=10)
    writer.write(_run_events()[0])
    opened = writer.opened_at
    assert opened is not None
    writer.roll_if_due(now=opened + 5)
    assert writer.finished == []
    writer.roll_if_due(now=opened + 10)
    assert writer.opened_at is None
    assert len(writer.finished) == 1
    writer.write(_run_events()[0])
    writer.close()
    assert len(writer.finished) == 2


def test_an_open_file_is_invisible_until_it_is_finished(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path)
    writer.write(_run_events()[0])
    assert event_log_files(tmp_path) == []
    assert [p.name.endswith(".inprogress") for p in tmp_path.iterdir()] == [True]
    writer.close()
    assert event_log_files(tmp_path) == writer.finished
    assert not any(p.name.endswith(".inprogress") for p in tmp_path.iterdir())


def test_parallel_writers_never_collide(tmp_path: Path) -> None:
    writers = [EventLogWriter(tmp_path, subtask=i % 2) for i in range(4)]
    for writer in writers:
        writer.write(_run_events()[0])
    for writer in writers:
        writer.close()
    names = [p.name for p in event_log_files(tmp_path)]
    assert len(names) == len(set(names)) == 4
    assert {n.split("-")[2] for n in names} == {"0000", "0001"}


def test_unknown_event_type_reads_back_as_unknown(tmp_path: Path) -> None:
    with EventLogWriter(tmp_path, version=1) as writer:
        writer.write(_run_events()[3])
    (event,) = read_events(tmp_path, typed=True)
    assert event.event_type is EventType.UNKNOWN


def test_the_writer_refuses_a_uri_rather_than_write_to_a_local_folder_named_after_it() -> None:
    with pytest.raises(ValueError, match="is a URI"):
        EventLogWriter("s3://bucket/events")


def _metadata_event() -> AgentEvent:
    long_note = "n" * 5000
    metadata = {
        "api_key": "abc",
        "header": f"x-goog-api-key: {_GOOGLE_KEY}",
        "note": long_note,
        "thought_signature": b"\x00sig\xff" * 1000,
        "nested": {"password": "hunter2", "note": long_note, "raw": b"\x01" * 3000},
    }
    call = ToolCall(id="c1", name="stock", arguments={"sku": "A1"}, metadata=metadata)
    answer = ChatMessage(
        role="assistant", parts=[TextPart(text="ok", metadata=metadata)], tool_calls=[call]
    )
    ids = {"job_id": "job", "key": "k", "run_id": "r"}
    return new_event("chat_response", sequence=1, messages=[answer], tool_calls=[call], **ids)


@pytest.mark.parametrize("level", ["standard", "verbose"])
def test_part_and_tool_call_metadata_are_redacted_and_bounded_bytes_kept(
    tmp_path: Path, level: str
) -> None:
    with EventLogWriter(tmp_path, level=level, codec="null") as writer:
        writer.write(_metadata_event())
    raw = writer.finished[0].read_bytes()
    assert _GOOGLE_KEY.encode() not in raw and b"hunter2" not in raw
    (event,) = read_events(tmp_path, typed=True)
    message = event.payload.messages[0]
    for metadata in (message.parts[0].metadata, message.tool_calls[0].metadata):
        assert metadata["api_key"] == "[REDACTED]"
        assert metadata["header"] == "x-goog-api-key: [REDACTED]"
        assert metadata["nested"]["password"] == "[REDACTED]"
        assert metadata["thought_signature"] == b"\x00sig\xff" * 1000  # bytes as they were
        assert metadata["nested"]["raw"] == b"\x01" * 3000
        if level == "standard":
            assert len(metadata["note"]) == 2048 and metadata["note"].endswith("…")
            assert len(metadata["nested"]["note"]) == 2048
        else:
            assert metadata["note"] == metadata["nested"]["note"] == "n" * 5000
