"""Behaviour of the AgentEvent model: JSON round trip, media only as refs, payload rules."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, EventType, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart, ToolCall

_REF = MediaRef(sha256="ab" * 32, mime_type="image/png", size_bytes=1234, uri="file:///m/ab")


def _chat_response() -> AgentEvent:
    answer = ChatMessage(
        role="assistant",
        parts=[TextPart(text="looking", metadata={"thought_signature": b"\x00\xffsig"})],
        tool_calls=[
            ToolCall(
                id="c1",
                name="lookup",
                arguments={"q": "x", "n": [1, 2]},
                metadata={"thought_signature": b"\x01\x02"},
            )
        ],
    )
    return new_event(
        "chat_response",
        job_id="job",
        key="k1",
        run_id="r1",
        sequence=2,
        upstream_event_id="e1",
        messages=[answer],
        tool_calls=answer.tool_calls,
        usage=TokenUsage(input_tokens=10, output_tokens=3),
        model="gemini-2.5-flash",
        latency_ms=12.5,
    )


def test_event_round_trips_through_json_with_metadata_bytes() -> None:
    event = _chat_response()
    again = AgentEvent.model_validate_json(event.model_dump_json())
    assert again == event
    assert again.payload.tool_calls[0].metadata["thought_signature"] == b"\x01\x02"


def test_new_event_fills_identity_and_a_fresh_id() -> None:
    first = _chat_response()
    second = _chat_response()
    assert first.event_type is EventType.CHAT_RESPONSE
    assert (first.job_id, first.key, first.run_id, first.sequence) == ("job", "k1", "r1", 2)
    assert first.event_id != second.event_id
    assert first.timestamp_ms > 1_700_000_000_000


def test_media_refs_are_accepted_in_messages_and_tool_results() -> None:
    image = ImagePart(mime_type="image/png", ref=_REF)
    event = new_event(
        EventType.TOOL_RESPONSE,
        job_id="job",
        key="k",
        run_id="r",
        sequence=4,
        tool_results=[ChatMessage.tool_result("c1", "camera", [image], is_error=False)],
    )
    assert event.payload.tool_results[0].parts[0].ref == _REF


def test_inline_media_is_refused_with_a_reason_and_without_the_bytes() -> None:
    secret_bytes = b"\x89PNG-very-private-pixels"
    message = ChatMessage.user([ImagePart(mime_type="image/png", data=secret_bytes)])
    with pytest.raises(ValidationError) as info:
        new_event("input", job_id="j", key="k", run_id="r", sequence=0, messages=[message])
    text = str(info.value)
    assert "offload it first" in text
    assert "private-pixels" not in text


def test_inline_media_in_a_tool_result_is_refused() -> None:
    result = ChatMessage.tool_result(
        "c1", "camera", [ImagePart(mime_type="image/png", data=b"pixels")]
    )
    with pytest.raises(ValidationError, match=re.escape("tool_results[0].parts[0]")):
        new_event(
            "tool_response", job_id="j", key="k", run_id="r", sequence=0, tool_results=[result]
        )


def test_tool_results_must_be_tool_messages() -> None:
    with pytest.raises(ValidationError, match="role must be tool"):
        new_event(
            "tool_response",
            job_id="j",
            key="k",
            run_id="r",
            sequence=0,
            tool_results=[ChatMessage.user("hi")],
        )


def test_unknown_payload_field_is_an_error() -> None:
    with pytest.raises(ValidationError, match="colour"):
        new_event("output", job_id="j", key="k", run_id="r", sequence=0, colour="red")


def test_a_run_event_is_the_agent_event_of_the_same_payload() -> None:
    from streamagents.serde.avro import LogLevel, to_record
    from streamagents.serde.events import RunEvent

    event = _chat_response()
    made = RunEvent.of(event)
    assert made.event_type is EventType.CHAT_RESPONSE
    assert made.model() == event
    assert made.json() == event.model_dump_json()
    for level in (LogLevel.STANDARD, LogLevel.VERBOSE):
        assert to_record(made, level=level) == to_record(event, level=level)


def test_a_payload_is_checked_where_it_is_built() -> None:
    """The runtime emits payload models: a misspelt field, a field of another kind or a bad
    value fails at the emitting site, before any event exists."""
    from streamagents.serde.event_payloads import OutputPayload, ToolRequestPayload

    with pytest.raises(ValidationError, match="colour"):
        OutputPayload(colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="stauts"):
        OutputPayload(stauts="ok")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="tool_results"):
        ToolRequestPayload(tool_results=[])  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="latency_ms"):
        OutputPayload(latency_ms=-1.0)
    with pytest.raises(ValidationError, match="kind"):
        OutputPayload(kind="error")  # type: ignore[arg-type]


def test_each_event_type_has_its_payload_model_with_numbers_as_numbers() -> None:
    from streamagents.serde.avro import to_record
    from streamagents.serde.event_payloads import ApprovalRequestedPayload

    event = new_event(
        "approval_requested",
        job_id="j",
        key="k",
        run_id="r",
        sequence=3,
        call_id="r.0002",
        deadline_ms=1_790_000_000_000,
    )
    assert isinstance(event.payload, ApprovalRequestedPayload)
    assert event.event_type is EventType.APPROVAL_REQUESTED
    assert event.payload.deadline_ms == 1_790_000_000_000
    stored = {"call_id": "r.0002", "deadline_ms": "1790000000000"}
    assert to_record(event)["payload"]["attributes"] == stored
    assert AgentEvent.model_validate_json(event.model_dump_json()) == event


def test_an_attribute_that_does_not_read_as_its_type_is_kept_as_written() -> None:
    from streamagents.serde.avro import to_record

    event = new_event(
        "approval_expired",
        job_id="j",
        key="k",
        run_id="r",
        sequence=3,
        attributes={"call_id": "c", "deadline_ms": "soon", "note": "from a newer writer"},
    )
    assert event.payload.deadline_ms is None
    assert event.payload.extra_attributes == {"deadline_ms": "soon", "note": "from a newer writer"}
    stored = {"call_id": "c", "deadline_ms": "soon", "note": "from a newer writer"}
    assert to_record(event)["payload"]["attributes"] == stored


def test_a_field_its_event_type_does_not_carry_is_an_error_naming_it() -> None:
    with pytest.raises(ValidationError, match="finish_reason"):
        new_event("output", job_id="j", key="k", run_id="r", sequence=0, finish_reason="stop")
    event = new_event(  # the stored form has every field: empty ones say nothing
        "output", job_id="j", key="k", run_id="r", sequence=0, finish_reason=None, tool_calls=[]
    )
    assert event.payload.kind == "output"


def test_every_event_type_has_one_payload_model_and_every_model_a_type() -> None:
    from streamagents.serde.event_payloads import PAYLOAD_MODELS

    assert set(PAYLOAD_MODELS) == {kind.value for kind in EventType}
