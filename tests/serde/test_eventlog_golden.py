"""Events of every type encode to the bytes the code before typed payloads wrote, and read back.

`data/eventlog_golden.json` holds, for each case below, what the code before typed event
payloads (commit c4af0a6) gave: the event's JSON text, its Avro binary record under every
shipped schema version at the standard and verbose levels (base64), and the JSON of the
event read back from each record (`read`: each distinct JSON with the records that give it).
The cases are shaped as the runtime makes them (the same facts in the same order), plus the
edge cases of each fact's conversion."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import fastavro
import pytest

from streamagents.serde.avro import (
    SCHEMA_VERSIONS,
    from_record,
    parsed_schema,
    record_encoder,
    to_record,
)
from streamagents.serde.chat import (
    GroundingSource,
    RetryAttempt,
    ServerToolEvidence,
    TokenUsage,
    retry_facts,
)
from streamagents.serde.events import AgentEvent, RunEvent, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart, ToolCall

GOLDEN = json.loads((Path(__file__).parent / "data" / "eventlog_golden.json").read_text())
SECRET = "sk-live0123456789abcdefghijklmnop"
_REF = MediaRef(sha256="ab" * 32, mime_type="image/png", size_bytes=1234, uri="file:///m/ab")
_CALL = ToolCall(
    id="call-1",
    name="refund",
    arguments={"order": "A1", "api_key": SECRET},
    metadata={"thought_signature": b"\x00\xffsig"},
)
_RETRIES = [
    RetryAttempt(
        attempt=1,
        ended_ms=1_790_000_000_100.0,
        error_type="RateLimited",
        status=429,
        backoff_ms=400.0,
    ),
    RetryAttempt(
        attempt=2, ended_ms=1_790_000_000_600.5, error_type="ServerError", backoff_ms=900.0
    ),
]


def _event(kind: str, sequence: int, **payload: object) -> AgentEvent:
    return new_event(
        kind,
        job_id="golden",
        key=None if kind == "error" and "record_length" in str(payload) else "k-1",
        run_id="run-golden",
        sequence=sequence,
        upstream_event_id=None if sequence == 1 else f"run-golden.{sequence - 1:04d}",
        timestamp_ms=1_790_000_000_000 + sequence,
        event_id=f"run-golden.{sequence:04d}",
        **payload,
    )


def stored_cases() -> list[tuple[str, AgentEvent]]:
    """The cases, built from the facts as the log stores them (string attributes)."""
    question = ChatMessage.user(
        [TextPart(text="What is this? " * 150), ImagePart(mime_type="image/png", ref=_REF)]
    )
    answer = ChatMessage(
        role="assistant",
        parts=[TextPart(text="looking", metadata={"thought_signature": b"\x01\x02"})],
        tool_calls=[_CALL],
    )
    result = ChatMessage.tool_result("call-1", "refund", f"failed: {SECRET}", is_error=True)
    search = ServerToolEvidence(
        tool="google_search",
        queries=["opening hours"],
        sources=[GroundingSource(uri="https://a.example", title="A"), GroundingSource(uri="b:")],
    )
    code = ServerToolEvidence(
        tool="code_execution",
        language="PYTHON",
        code="print(1)\n" * 240,
        outcome="OUTCOME_OK",
        output="1\n" * 10,
    )
    cases = [
        ("input", _event("input", 1, messages=[question], attributes={"input_id": "in-1"})),
        (
            "chat_request",
            _event(
                "chat_request",
                2,
                model="gemini-2.5-flash",
                attributes={"provider": "gemini", "tools": "camera,lookup"},
            ),
        ),
        (
            "chat_request_no_tools",
            _event(
                "chat_request", 3, model="gpt-test", attributes={"provider": "openai", "tools": ""}
            ),
        ),
        (
            "chat_response",
            _event(
                "chat_response",
                4,
                messages=[answer],
                usage=TokenUsage(input_tokens=300, output_tokens=20, cached_tokens=256),
                model="gemini-2.5-flash-001",
                latency_ms=395.25,
                finish_reason="STOP",
                interaction_id="int-2",
                continued_from="int-1",
                attempts=3,
                attributes={
                    "continuation_fallback": "int-0 is gone",
                    "cached_content": "cc/1",
                    "sources": "2",
                    **retry_facts(_RETRIES),
                },
            ),
        ),
        (
            "chat_response_plain",
            _event(
                "chat_response",
                5,
                messages=[ChatMessage(role="assistant", content="hi")],
                usage=TokenUsage(input_tokens=5, output_tokens=1),
                model="m",
                latency_ms=1.0,
                finish_reason="stop",
                attempts=1,
                cost_usd=0.0012,
            ),
        ),
        (
            "chat_response_error",
            _event(
                "chat_response",
                6,
                error_class="RateLimited",
                error_message=f"too many requests, key {SECRET} " + "x" * 2100,
                latency_ms=2.5,
                attempts=4,
                attributes=retry_facts(_RETRIES),
            ),
        ),
        (
            "chat_response_error_attempts_unknown",
            _event(
                "chat_response",
                7,
                error_class="EmptyResponse",
                error_message="no response",
                latency_ms=0.0,
            ),
        ),
        ("tool_request", _event("tool_request", 8, tool_calls=[_CALL])),
        ("tool_response", _event("tool_response", 9, tool_results=[result], latency_ms=45.0)),
        (
            "tool_response_no_latency",
            _event(
                "tool_response",
                10,
                tool_results=[
                    ChatMessage.tool_result(
                        "call-1",
                        "refund",
                        [TextPart(text="ok"), ImagePart(mime_type="image/png", ref=_REF)],
                    )
                ],
            ),
        ),
        (
            "output",
            _event(
                "output",
                11,
                messages=[ChatMessage(role="assistant", content="bye")],
                attributes={"input_id": "in-1", "status": "ok"},
            ),
        ),
        ("output_error", _event("output", 12, attributes={"input_id": "in-1", "status": "error"})),
        (
            "error",
            _event(
                "error",
                13,
                error_class="MediaNotFound",
                error_message="no object for ref(s) abc",
                attributes={"input_id": "in-1"},
            ),
        ),
        (
            "error_invalid_record",
            _event(
                "error",
                14,
                error_class="InvalidEventRecord",
                error_message="event log record rejected: x",
                attributes={"record_length": "4321"},
            ),
        ),
        (
            "budget_exceeded",
            _event(
                "budget_exceeded",
                15,
                error_class="BudgetExceeded",
                error_message="budget max_model_calls=2 exceeded: ...",
                attributes={"input_id": "in-1", "budget": "max_model_calls", "limit": "2"},
            ),
        ),
        (
            "budget_exceeded_fraction",
            _event(
                "budget_exceeded",
                16,
                error_class="BudgetExceeded",
                error_message="budget run_timeout_s=0.5 exceeded",
                attributes={"input_id": "in-1", "budget": "run_timeout_s", "limit": "0.5"},
            ),
        ),
        (
            "budget_exceeded_large",
            _event(
                "budget_exceeded",
                17,
                error_class="BudgetExceeded",
                error_message="budget max_tokens=1e+06 exceeded",
                attributes={"input_id": "in-1", "budget": "max_tokens", "limit": "1e+06"},
            ),
        ),
        (
            "memory_trimmed",
            _event(
                "memory_trimmed",
                18,
                attributes={
                    "dropped_messages": "4",
                    "dropped_bytes": "1234",
                    "kept_messages": "6",
                    "kept_bytes": "98765",
                },
            ),
        ),
        ("server_tool_search", _event("server_tool", 19, evidence=[search])),
        ("server_tool_code", _event("server_tool", 20, evidence=[code])),
        (
            "context_cache_created",
            _event(
                "context_cache",
                21,
                attributes={
                    "action": "created",
                    "reason": "4096 tokens",
                    "tokens": "4096",
                    "cache": "cachedContents/abc",
                },
            ),
        ),
        (
            "context_cache_off",
            _event(
                "context_cache",
                22,
                attributes={
                    "action": "off",
                    "reason": f"the server refused: key {SECRET}",
                    "cache": "cachedContents/abc",
                },
            ),
        ),
        (
            "context_cache_create_failed",
            _event(
                "context_cache",
                23,
                attributes={"action": "create_failed", "reason": "ServerError: 503"},
            ),
        ),
        (
            "approval_requested",
            _event(
                "approval_requested",
                24,
                tool_calls=[_CALL],
                attributes={"call_id": "run-golden.0008", "deadline_ms": "1790086400000"},
            ),
        ),
        (
            "approval_decided",
            _event(
                "approval_decided",
                25,
                tool_calls=[_CALL],
                attributes={
                    "call_id": "run-golden.0008",
                    "decision": "approve",
                    "by": "ana",
                    "comment": f"fine, use {SECRET}",
                    "edited_arguments": "true",
                },
            ),
        ),
        (
            "approval_rejected",
            _event(
                "approval_decided",
                26,
                tool_calls=[_CALL],
                attributes={
                    "call_id": "run-golden.0008",
                    "decision": "reject",
                    "by": "",
                    "comment": "",
                    "edited_arguments": "false",
                },
            ),
        ),
        (
            "approval_expired",
            _event(
                "approval_expired",
                27,
                tool_calls=[_CALL],
                attributes={"call_id": "run-golden.0008", "deadline_ms": "1790086400000"},
            ),
        ),
        (
            "followup_scheduled",
            _event(
                "followup_scheduled",
                28,
                tool_calls=[_CALL],
                attributes={"followup_id": "run-golden.0008", "due_ms": "1790003600000"},
            ),
        ),
        (
            "followup_fired",
            _event(
                "followup_fired",
                29,
                attributes={
                    "followup_id": "run-golden.0008",
                    "scheduled_by": "run-earlier",
                    "due_ms": "1790003600000",
                    "input_id": "followup-run-golden.0008",
                },
            ),
        ),
        (
            "followup_cancelled",
            _event(
                "followup_cancelled",
                30,
                attributes={
                    "followup_id": "run-golden.0008",
                    "due_ms": "1790003600000",
                    "cancelled_by": "in-2",
                },
            ),
        ),
    ]
    return cases


CASES = dict(stored_cases())


def test_every_event_type_has_a_golden_case() -> None:
    from streamagents.serde.events import EventType

    kinds = {event.event_type for event in CASES.values()}
    assert kinds == set(EventType) - {EventType.UNKNOWN}
    assert set(CASES) == set(GOLDEN)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_events_encode_to_the_golden_bytes_under_every_version_and_level(name: str) -> None:
    event = CASES[name]
    golden = GOLDEN[name]
    assert event.model_dump_json() == golden["json"]
    for version in SCHEMA_VERSIONS:
        for level in ("standard", "verbose"):
            expected = base64.b64decode(golden["avro"][f"v{version}-{level}"])
            for form in (event, RunEvent.of(event), event.model_dump_json()):
                record = to_record(form, version=version, level=level)
                assert record_encoder(version).encode(record) == expected, (version, level)
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, parsed_schema(version), record)
            assert buffer.getvalue() == expected


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_records_read_back_as_before(name: str) -> None:
    for read in GOLDEN[name]["read"]:
        for written in read["as"]:
            version = int(written[1:].partition("-")[0])
            data = base64.b64decode(GOLDEN[name]["avro"][written])
            record = fastavro.schemaless_reader(io.BytesIO(data), parsed_schema(version))
            assert from_record(record).model_dump_json() == read["json"], written
