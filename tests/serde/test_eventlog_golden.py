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
from types import SimpleNamespace
from typing import Any

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
)
from streamagents.serde.event_payloads import PAYLOAD_MODELS
from streamagents.serde.events import AgentEvent, EventType, RunEvent, new_event
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
_INPUT_LINE = json.dumps(
    {"id": "in-1", "key": "k-1", "text": "What is this? " * 150, "tier": "gold", "token": SECRET}
)
"""An input line as received, longer than a STANDARD log keeps."""
_RETRIES_TEXT = json.dumps([retry.model_dump(mode="json") for retry in _RETRIES])
"""The retries attribute, as the log stores it."""


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


def _fixtures() -> SimpleNamespace:
    """The messages, results and evidence the cases carry."""
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
    return SimpleNamespace(
        question=question, answer=answer, result=result, search=search, code=code
    )


def stored_cases() -> list[tuple[str, AgentEvent]]:
    """The cases, built from the facts as the log stores them (string attributes), as
    event JSON written by hand has them: the golden records were made from these."""
    f = _fixtures()
    question, answer, result, search, code = f.question, f.answer, f.result, f.search, f.code
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
                    "retries": _RETRIES_TEXT,
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
                attributes={"retries": _RETRIES_TEXT},
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
        (
            "chat_response_fallback",
            _event(
                "chat_response",
                31,
                messages=[ChatMessage(role="assistant", content="from the fallback")],
                usage=TokenUsage(input_tokens=7, output_tokens=3),
                model="gpt-fallback",
                latency_ms=12.5,
                finish_reason="stop",
                attempts=1,
                answered_provider="openai",
                fallback=True,
                attributes={"passed_over": "gemini/gemini-3-pro,gemini/gemini-3-flash"},
            ),
        ),
        (
            "budget_deferred",
            _event(
                "budget_deferred",
                32,
                attributes={
                    "input_id": "in-1",
                    "budget": "per_tenant.cost",
                    "limit": "0.25",
                    "window_s": "3600",
                    "until_ms": "1790003600000",
                },
            ),
        ),
        (
            "input_replayable",
            _event(
                "input",
                33,
                messages=[question],
                input_record=_INPUT_LINE,
                attributes={
                    "replay_of": "run-recorded",
                    "input_id": "in-1",
                    "key_sequence": "7",
                    "config_fingerprint": "cfg-0123abcd",
                },
            ),
        ),
        (
            "output_tokens",
            _event(
                "output",
                34,
                messages=[ChatMessage(role="assistant", content="bye")],
                usage=TokenUsage(input_tokens=40, output_tokens=9),
                latency_ms=812.5,
                attributes={"replay_of": "run-recorded", "input_id": "in-1", "status": "ok"},
            ),
        ),
    ]
    return cases


def typed_facts() -> list[tuple[str, str, int, dict[str, Any]]]:
    """The same cases as the runtime now gives them: each type's payload fields, typed
    (name, event type, sequence, payload fields)."""
    f = _fixtures()
    deadline, due, approval = 1_790_086_400_000, 1_790_003_600_000, "run-golden.0008"
    return [
        ("input", "input", 1, {"messages": [f.question], "input_id": "in-1"}),
        ("chat_request", "chat_request", 2,
         {"model": "gemini-2.5-flash", "provider": "gemini", "tools": ["camera", "lookup"]}),
        ("chat_request_no_tools", "chat_request", 3,
         {"model": "gpt-test", "provider": "openai", "tools": []}),
        ("chat_response", "chat_response", 4, {
            "messages": [f.answer],
            "usage": TokenUsage(input_tokens=300, output_tokens=20, cached_tokens=256),
            "model": "gemini-2.5-flash-001", "latency_ms": 395.25, "finish_reason": "STOP",
            "interaction_id": "int-2", "continued_from": "int-1", "attempts": 3,
            "continuation_fallback": "int-0 is gone", "cached_content": "cc/1", "sources": 2,
            "retries": _RETRIES}),
        ("chat_response_plain", "chat_response", 5, {
            "messages": [ChatMessage(role="assistant", content="hi")],
            "usage": TokenUsage(input_tokens=5, output_tokens=1), "model": "m",
            "latency_ms": 1.0, "finish_reason": "stop", "attempts": 1, "cost_usd": 0.0012}),
        ("chat_response_error", "chat_response", 6, {
            "error_class": "RateLimited",
            "error_message": f"too many requests, key {SECRET} " + "x" * 2100,
            "latency_ms": 2.5, "attempts": 4, "retries": _RETRIES}),
        ("chat_response_error_attempts_unknown", "chat_response", 7,
         {"error_class": "EmptyResponse", "error_message": "no response", "latency_ms": 0.0}),
        ("tool_request", "tool_request", 8, {"tool_calls": [_CALL]}),
        ("tool_response", "tool_response", 9, {"tool_results": [f.result], "latency_ms": 45.0}),
        ("tool_response_no_latency", "tool_response", 10, {"tool_results": [
            ChatMessage.tool_result("call-1", "refund", [TextPart(text="ok"), ImagePart(
                mime_type="image/png", ref=_REF)])]}),
        ("output", "output", 11, {"messages": [ChatMessage(role="assistant", content="bye")],
                                  "input_id": "in-1", "status": "ok"}),
        ("output_error", "output", 12, {"input_id": "in-1", "status": "error"}),
        ("error", "error", 13, {"error_class": "MediaNotFound",
                                "error_message": "no object for ref(s) abc",
                                "input_id": "in-1"}),
        ("error_invalid_record", "error", 14, {"error_class": "InvalidEventRecord",
                                               "error_message": "event log record rejected: x",
                                               "record_length": 4321}),
        ("budget_exceeded", "budget_exceeded", 15, {
            "error_class": "BudgetExceeded",
            "error_message": "budget max_model_calls=2 exceeded: ...",
            "input_id": "in-1", "budget": "max_model_calls", "limit": 2}),
        ("budget_exceeded_fraction", "budget_exceeded", 16, {
            "error_class": "BudgetExceeded", "error_message": "budget run_timeout_s=0.5 exceeded",
            "input_id": "in-1", "budget": "run_timeout_s", "limit": 0.5}),
        ("budget_exceeded_large", "budget_exceeded", 17, {
            "error_class": "BudgetExceeded", "error_message": "budget max_tokens=1e+06 exceeded",
            "input_id": "in-1", "budget": "max_tokens", "limit": 1_000_000}),
        ("memory_trimmed", "memory_trimmed", 18, {
            "dropped_messages": 4, "dropped_bytes": 1234, "kept_messages": 6,
            "kept_bytes": 98765}),
        ("server_tool_search", "server_tool", 19, {"evidence": [f.search]}),
        ("server_tool_code", "server_tool", 20, {"evidence": [f.code]}),
        ("context_cache_created", "context_cache", 21, {
            "action": "created", "reason": "4096 tokens", "tokens": 4096,
            "cache": "cachedContents/abc"}),
        ("context_cache_off", "context_cache", 22, {
            "action": "off", "reason": f"the server refused: key {SECRET}",
            "cache": "cachedContents/abc"}),
        ("context_cache_create_failed", "context_cache", 23,
         {"action": "create_failed", "reason": "ServerError: 503"}),
        ("approval_requested", "approval_requested", 24,
         {"tool_calls": [_CALL], "call_id": approval, "deadline_ms": deadline}),
        ("approval_decided", "approval_decided", 25, {
            "tool_calls": [_CALL], "call_id": approval, "decision": "approve", "by": "ana",
            "comment": f"fine, use {SECRET}", "edited_arguments": True}),
        ("approval_rejected", "approval_decided", 26, {
            "tool_calls": [_CALL], "call_id": approval, "decision": "reject", "by": "",
            "comment": "", "edited_arguments": False}),
        ("approval_expired", "approval_expired", 27,
         {"tool_calls": [_CALL], "call_id": approval, "deadline_ms": deadline}),
        ("followup_scheduled", "followup_scheduled", 28,
         {"tool_calls": [_CALL], "followup_id": approval, "due_ms": due}),
        ("followup_fired", "followup_fired", 29, {
            "followup_id": approval, "scheduled_by": "run-earlier", "due_ms": due,
            "input_id": "followup-run-golden.0008"}),
        ("followup_cancelled", "followup_cancelled", 30,
         {"followup_id": approval, "due_ms": due, "cancelled_by": "in-2"}),
        ("chat_response_fallback", "chat_response", 31, {
            "messages": [ChatMessage(role="assistant", content="from the fallback")],
            "usage": TokenUsage(input_tokens=7, output_tokens=3), "model": "gpt-fallback",
            "latency_ms": 12.5, "finish_reason": "stop", "attempts": 1,
            "answered_provider": "openai", "fallback": True,
            "passed_over": ["gemini/gemini-3-pro", "gemini/gemini-3-flash"]}),
        ("budget_deferred", "budget_deferred", 32,
         {"input_id": "in-1", "budget": "per_tenant.cost", "limit": 0.25, "window_s": 3600.0,
          "until_ms": due}),
        ("input_replayable", "input", 33, {
            "messages": [f.question], "input_id": "in-1", "input_record": _INPUT_LINE,
            "key_sequence": 7, "config_fingerprint": "cfg-0123abcd",
            "replay_of": "run-recorded"}),
        ("output_tokens", "output", 34, {
            "messages": [ChatMessage(role="assistant", content="bye")],
            "usage": TokenUsage(input_tokens=40, output_tokens=9), "latency_ms": 812.5,
            "input_id": "in-1", "status": "ok", "replay_of": "run-recorded"}),
    ]  # fmt: skip


STORED = dict(stored_cases())
TYPED = {name: (kind, sequence, fields) for name, kind, sequence, fields in typed_facts()}


def _run_event(name: str) -> RunEvent:
    """The case as the runtime makes it: a `RunEvent` of the payload model built from its
    typed fields."""
    kind, sequence, fields = TYPED[name]
    event = _event(kind, sequence, **fields)
    identity = {k: getattr(event, k) for k in ("event_id", "job_id", "key", "run_id")}
    return RunEvent(
        PAYLOAD_MODELS[kind](**fields),
        **identity,
        sequence=sequence,
        timestamp_ms=event.timestamp_ms,
        upstream_event_id=event.upstream_event_id,
    )


def test_every_event_type_has_a_golden_case() -> None:
    kinds = {kind for kind, _, _ in TYPED.values()}
    assert kinds == {kind.value for kind in EventType} - {"unknown"}
    assert set(TYPED) == set(STORED) == set(GOLDEN)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_typed_events_give_the_golden_json_and_bytes_under_every_version_and_level(
    name: str,
) -> None:
    kind, sequence, fields = TYPED[name]
    event = _event(kind, sequence, **fields)
    golden = GOLDEN[name]
    assert event == STORED[name]  # the stored form (JSON written by hand) reads the same
    assert event.model_dump_json() == golden["json"]
    assert _run_event(name).json() == golden["json"]
    for version in SCHEMA_VERSIONS:
        for level in ("standard", "verbose"):
            expected = base64.b64decode(golden["avro"][f"v{version}-{level}"])
            for form in (event, _run_event(name), RunEvent.of(event), golden["json"]):
                record = to_record(form, version=version, level=level)
                assert record_encoder(version).encode(record) == expected, (version, level)
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, parsed_schema(version), record)
            assert buffer.getvalue() == expected


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_records_read_back_as_before_into_typed_payloads(name: str) -> None:
    for read in GOLDEN[name]["read"]:
        for written in read["as"]:
            version = int(written[1:].partition("-")[0])
            data = base64.b64decode(GOLDEN[name]["avro"][written])
            record = fastavro.schemaless_reader(io.BytesIO(data), parsed_schema(version))
            event = from_record(record)
            assert event.model_dump_json() == read["json"], written
            newest = f"v{SCHEMA_VERSIONS[-1]}-verbose"
            if written == newest and SECRET not in GOLDEN[name]["json"]:  # nothing cut out
                kind, sequence, fields = TYPED[name]
                assert event == _event(kind, sequence, **fields)
