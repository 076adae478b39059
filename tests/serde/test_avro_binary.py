"""The compiled Avro encoder gives fastavro's bytes, for any event, version and level."""

from __future__ import annotations

import enum
import io
import math
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.serde.avro import (
    SCHEMA_VERSIONS,
    LogLevel,
    parsed_schema,
    record_encoder,
    to_record,
)
from streamagents.serde.avro_binary import RecordEncoder
from streamagents.serde.chat import GroundingSource, ServerToolEvidence, TokenUsage
from streamagents.serde.event_payloads import PAYLOAD_MODELS
from streamagents.serde.events import AgentEvent, EventType, RunEvent, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart, ToolCall


def fastavro_bytes(record: Any, schema: Any) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    return buffer.getvalue()


text = st.text(max_size=40)  # any code point, surrogates excluded by hypothesis' default
json_scalar = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
metadata = st.dictionaries(text, json_value | st.binary(max_size=16), max_size=3)


@st.composite
def parts(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return TextPart(text=draw(text), metadata=draw(metadata))
    if draw(st.booleans()):
        return ImagePart(
            mime_type="image/png",
            url="https://example.com/" + draw(st.text("abc/._-", max_size=20)),
        )
    ref = MediaRef(
        sha256="ab" * 32,
        mime_type="image/jpeg",
        size_bytes=draw(st.integers(0, 2**40)),
        uri=draw(st.none() | text),
    )
    return ImagePart(mime_type="image/jpeg", ref=ref, metadata=draw(metadata))


tool_calls = st.builds(
    ToolCall,
    id=text,
    name=st.text("abcdefgh_", min_size=1, max_size=10),
    arguments=st.dictionaries(text, json_value, max_size=3),
    metadata=metadata,
)


@st.composite
def messages(draw: st.DrawFn, role: str | None = None) -> ChatMessage:
    role = role or draw(st.sampled_from(["user", "assistant"]))
    if role == "tool":
        call_id = draw(st.text(min_size=1, max_size=10))
        return ChatMessage.tool_result(call_id, "lookup", draw(text), is_error=draw(st.booleans()))
    found = draw(st.lists(parts(), max_size=3))
    calls = draw(st.lists(tool_calls, max_size=2)) if role == "assistant" else []
    if found:
        return ChatMessage(role=role, parts=found, tool_calls=calls, metadata=draw(metadata))
    return ChatMessage(role=role, content=draw(text), tool_calls=calls, metadata=draw(metadata))


evidence = st.builds(
    ServerToolEvidence,
    tool=st.sampled_from(["google_search", "url_context", "code_execution"]),
    queries=st.lists(text, max_size=2),
    sources=st.lists(st.builds(GroundingSource, uri=text, title=text), max_size=2),
    code=st.none() | text,
    output=st.none() | text,
)
optional_float = st.none() | st.floats(min_value=0, allow_infinity=False, allow_nan=False)


@st.composite
def events(draw: st.DrawFn) -> AgentEvent:
    payload: dict[str, Any] = {
        "messages": draw(st.lists(messages(), max_size=2)),
        "tool_calls": draw(st.lists(tool_calls, max_size=2)),
        "tool_results": draw(st.lists(messages("tool"), max_size=2)),
        "usage": draw(
            st.none()
            | st.builds(
                TokenUsage,
                input_tokens=st.integers(0, 2**40),
                output_tokens=st.integers(0, 2**40),
                cached_tokens=st.integers(0, 2**20),
            )
        ),
        "latency_ms": draw(optional_float),
        "cost_usd": draw(optional_float),
        "attempts": draw(st.none() | st.integers(0, 100)),
        "error_message": draw(st.none() | st.text(max_size=3000)),
        "attributes": draw(st.dictionaries(text, text, max_size=3)),
        "evidence": draw(st.lists(evidence, max_size=2)),
    }
    for name in ("model", "error_class", "finish_reason", "interaction_id", "continued_from"):
        payload[name] = draw(st.none() | text)
    kind = draw(st.sampled_from(list(EventType)))
    fields = PAYLOAD_MODELS[kind.value].model_fields  # those of its type; stored attributes
    payload = {
        k: v
        for k, v in payload.items()
        if v not in (None, [], {}) and (k in fields or k == "attributes")
    }  # the rest: defaults
    return new_event(
        kind,
        job_id=draw(text),
        key=draw(st.none() | text),
        run_id=draw(st.none() | text),
        sequence=draw(st.integers(0, 2**63 - 1)),
        timestamp_ms=draw(st.integers(-(2**62), 2**62)),
        upstream_event_id=draw(st.none() | text),
        **payload,
    )


@settings(max_examples=150, deadline=None)
@given(event=events(), level=st.sampled_from([LogLevel.STANDARD, LogLevel.VERBOSE]))
def test_every_version_encodes_every_event_as_fastavro_does(
    event: AgentEvent, level: LogLevel
) -> None:
    for version in SCHEMA_VERSIONS:
        record = to_record(event, version=version, level=level, text_limit=100)
        expected = fastavro_bytes(record, parsed_schema(version))
        assert record_encoder(version).encode(record) == expected


@settings(max_examples=100, deadline=None)
@given(event=events(), level=st.sampled_from([LogLevel.STANDARD, LogLevel.VERBOSE]))
def test_a_run_event_gives_the_records_of_its_agent_event(
    event: AgentEvent, level: LogLevel
) -> None:
    made = RunEvent.of(event)
    assert made.model() == event
    for version in SCHEMA_VERSIONS:
        assert to_record(made, version=version, level=level) == to_record(
            event, version=version, level=level
        )


def test_a_run_event_with_inline_media_is_refused_by_the_log() -> None:
    pixels = ImagePart(mime_type="image/png", data=b"\x89PNG")
    unchecked = PAYLOAD_MODELS["input"].model_construct(  # past the payload's own refusal
        messages=[ChatMessage.user([TextPart(text="see"), pixels])]
    )
    made = RunEvent(
        unchecked,  # type: ignore[arg-type]
        event_id="e",
        job_id="j",
        key="k",
        run_id="r",
        sequence=0,
        timestamp_ms=0,
        upstream_event_id=None,
    )
    with pytest.raises(ValueError, match="offload it first"):
        to_record(made)


_SCHEMA = {
    "type": "record",
    "name": "Probe",
    "namespace": "test.probe",
    "fields": [
        {"name": "n", "type": "long"},
        {"name": "x", "type": "double"},
        {
            "name": "u",
            "type": ["null", "boolean", "long", "double", "string", "bytes"],
        },
        {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "next", "type": ["null", "Probe"]},
    ],
}


class Size(enum.IntEnum):
    LARGE = 3


@pytest.mark.parametrize(
    "record",
    [
        {"n": 0, "x": 0.0, "u": None, "m": {}, "next": None},
        {"n": 2**63 - 1, "x": math.nan, "u": True, "m": {"a": 1, "é": None}, "next": None},
        {"n": -(2**63), "x": -math.inf, "u": Size.LARGE, "m": {}, "next": None},
        {"n": -1, "x": 1.5, "u": 2.5, "m": {"": -7}, "next": None},
        {"n": 64, "x": 1, "u": "a\U0001f600", "m": {}, "next": None},
        {
            "n": 1,
            "x": 2.0,
            "u": b"\x00\xff",
            "m": {},
            "next": ("test.probe.Probe", {"n": 3, "x": 0.5, "u": "", "m": {}, "next": None}),
        },
        {
            "n": 1,
            "x": 2.0,
            "u": ("long", 5),
            "m": {},
            "next": {"n": 2, "x": 3.0, "u": None, "m": {}, "next": None},
        },
    ],
)
def test_plain_union_values_recursion_and_extreme_numbers_match_fastavro(
    record: dict[str, Any],
) -> None:
    expected = fastavro_bytes(record, fastavro.parse_schema(_SCHEMA))
    assert RecordEncoder(_SCHEMA).encode(record) == expected


def test_a_record_fastavro_refuses_is_refused_and_leaves_the_output_as_it_was() -> None:
    encoder = RecordEncoder(_SCHEMA)
    out = bytearray(b"kept")
    bad = {"n": 1, "x": 2.0, "u": object(), "m": {}, "next": None}
    with pytest.raises((ValueError, TypeError)):
        encoder.encode_into(out, bad)
    assert out == b"kept"
    with pytest.raises((ValueError, TypeError, KeyError)):
        encoder.encode_into(out, {"n": 1})  # fields missing
    assert out == b"kept"
