"""Avro single-object encoding of event-log records: header, resolution to every version,
refusal of foreign messages. (Avro Java agrees byte for byte: test_eventlog_avro_java.py.)"""

from __future__ import annotations

import itertools

import pytest

from streamagents.serde import avro_single_object as single_object
from streamagents.serde.avro import SCHEMA_VERSIONS, LogLevel, from_record, to_record
from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage


def event() -> AgentEvent:
    return new_event(
        "chat_response",
        job_id="job",
        key="C-1",
        run_id="r-1",
        sequence=3,
        messages=[ChatMessage.user("hello é")],
        usage=TokenUsage(input_tokens=5, output_tokens=2),
        latency_ms=12.5,
        attributes={"input_id": "T-1"},
    )


def test_a_message_is_marker_fingerprint_and_body() -> None:
    for version in SCHEMA_VERSIONS:
        message = single_object.encode(
            to_record(event(), version=version, level=LogLevel.VERBOSE), version
        )
        assert message[:2] == b"\xc3\x01"
        assert message[2:10] == single_object.fingerprint(version)
        assert single_object.writer_version(message) == version
    fingerprints = {single_object.fingerprint(v) for v in SCHEMA_VERSIONS}
    assert len(fingerprints) == len(SCHEMA_VERSIONS)


@pytest.mark.parametrize(
    "written,reader", list(itertools.product(SCHEMA_VERSIONS, SCHEMA_VERSIONS))
)
def test_every_version_decodes_to_every_version(written: int, reader: int) -> None:
    original = event()
    message = single_object.encode(
        to_record(original, version=written, level=LogLevel.VERBOSE), written
    )
    decoded = from_record(single_object.decode(message, reader))
    assert decoded.event_id == original.event_id
    assert decoded.key == "C-1" and decoded.sequence == 3
    assert decoded.payload.messages[0].content == "hello é"
    assert decoded.payload.attributes == {"input_id": "T-1"}


def test_foreign_messages_are_refused_with_the_reason() -> None:
    message = single_object.encode(to_record(event(), version=1), 1)
    with pytest.raises(single_object.UnknownSchema, match="no C3 01 marker"):
        single_object.decode(b'{"json": true}')
    with pytest.raises(single_object.UnknownSchema, match="no C3 01 marker"):
        single_object.decode(message[:9])
    forged = message[:2] + bytes(8) + message[10:]
    with pytest.raises(single_object.UnknownSchema, match="0000000000000000 is not one of"):
        single_object.decode(forged)
