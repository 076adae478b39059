"""The typed records a run emits serialise to exactly the JSON the hand-built dicts gave
(the format users read), and a `Step` of each kind carrying them still round-trips through
JSON."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

from streamagents.operators.agent import RunState, Step
from streamagents.operators.agent.emitted_records import (
    ApprovalRequest,
    DeadLetter,
    OutputRecord,
    dead_letter_record,
)
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_state import Continue, Finish, ModelAction
from streamagents.serde.chat import AnsweredBy, TokenUsage
from streamagents.serde.messages import ImagePart, MediaRef, TextPart

STEP: TypeAdapter[Step] = TypeAdapter(Step)

REF = MediaRef(sha256="ab" * 32, mime_type="image/png", size_bytes=3, uri="file:///m/ab")
PARTS = [TextPart(text="voilà, le reçu"), ImagePart(mime_type="image/png", ref=REF)]
ANSWERED = AnsweredBy(provider="openai", model="gpt-fallback", fallback=True)
ATTRIBUTES: dict[str, Any] = {"customer": {"id": 42, "name": "Zoë"}, "score": 0.5, "ok": True}


def output_dict(status: str, error: ErrorInfo | None, parts: list[Any]) -> dict[str, Any]:
    """An output record as the runtime built it by hand before it was typed."""
    return {
        "id": "in-1",
        "key": "k-ü",
        "run_id": "run-1",
        "status": status,
        "text": "voilà, le reçu" if status == "ok" else "",
        "parts": [p.model_dump(mode="json") for p in parts],
        "error": error.model_dump(exclude_none=True) if error is not None else None,
        "usage": {"input_tokens": 12, "output_tokens": 3, "cached_tokens": 2},
        "model_calls": 2,
        "tool_calls": 1,
        "latency_ms": 40,
        "attributes": ATTRIBUTES,
        "answered_by": ANSWERED.model_dump() if status == "ok" else None,
        "cost_usd": 0.0021,
        "call_costs_usd": [0.001, 0.0011],
    }


def output_record(status: str, error: ErrorInfo | None, parts: list[Any]) -> OutputRecord:
    return OutputRecord(
        id="in-1",
        key="k-ü",
        run_id="run-1",
        status=status,  # type: ignore[arg-type]
        text="voilà, le reçu" if status == "ok" else "",
        parts=parts,
        error=error,
        usage=TokenUsage(input_tokens=12, output_tokens=3, cached_tokens=2),
        model_calls=2,
        tool_calls=1,
        latency_ms=40,
        attributes=ATTRIBUTES,
        answered_by=ANSWERED if status == "ok" else None,
        cost_usd=0.0021,
        call_costs_usd=[0.001, 0.0011],
    )


def test_output_records_serialise_byte_identical_to_the_hand_built_json() -> None:
    budget = ErrorInfo(type="BudgetExceeded", message="budget x", budget="max_tokens", limit=30)
    plain = ErrorInfo(type="BadRequest", message="refusé")
    for status, error, parts in (("ok", None, PARTS), ("ok", None, []), ("error", budget, [])):
        expected = json.dumps(output_dict(status, error, parts), ensure_ascii=False)
        assert output_record(status, error, parts).to_json() == expected
    expected = json.dumps(output_dict("error", plain, []), ensure_ascii=False)
    assert output_record("error", plain, []).to_json() == expected


def test_dead_letters_serialise_byte_identical_to_the_hand_built_json() -> None:
    error = ErrorInfo(type="InvalidJson", message="input is not valid JSON at char 3")
    for received, key, record_id, given in (
        ('{"id": "x-1", "text": "héllo"}', "k", None, "x-1"),
        ("not json", None, None, None),
        ('{"id": "x-2"}', "k", "run-id", "run-id"),
    ):
        expected = {
            "stage": "parse",
            "error_type": error.type,
            "reason": error.message,
            "key": key,
            "id": given,
            "input": received,
        }
        letter = DeadLetter.build("parse", error, received, key=key, record_id=record_id)
        assert letter.to_json() == json.dumps(expected, ensure_ascii=False)
        assert dead_letter_record("parse", error, received, key=key, record_id=record_id) == (
            letter.to_json()
        )


def test_a_dead_letter_escapes_a_lone_surrogate_as_before() -> None:
    received = '{"text": "a\udc80b"}'
    letter = DeadLetter.build("parse", ErrorInfo(type="InvalidText", message="m"), received)
    expected = {
        "stage": "parse",
        "error_type": "InvalidText",
        "reason": "m",
        "key": None,
        "id": None,
        "input": received,
    }
    assert letter.to_json() == json.dumps(expected)
    letter.to_json().encode("utf-8")  # valid UTF-8 text


def test_approval_requests_serialise_byte_identical_to_the_hand_built_json() -> None:
    fields: dict[str, Any] = {
        "call_id": "run-1.0004",
        "tool_call_id": "call-0",
        "run_id": "run-1",
        "input_id": "in-1",
        "key": "k",
        "tool": "refund",
        "arguments": {"order": "Ä1", "amount": 30.5, "items": [1, 2]},
        "text": "Je vérifie.\nUn instant.",
        "requested_ms": 1_000,
        "deadline_ms": 87_401_000,
    }
    assert ApprovalRequest(**fields).to_json() == json.dumps(fields, ensure_ascii=False)


def test_a_step_carrying_typed_records_round_trips_through_json() -> None:
    letter = DeadLetter.build("run", ErrorInfo(type="X", message="m"), '{"id": "i"}', key="k")
    request = ApprovalRequest(
        call_id="c",
        tool_call_id="t",
        run_id="r",
        input_id="i",
        key="k",
        tool="refund",
        arguments={"a": 1},
        text="",
        requested_ms=1,
        deadline_ms=2,
    )
    state = RunState(
        run_id="r",
        input_id="i",
        key="k",
        started_ms=1,
        messages=[],
        pending=ModelAction(request_event_id="r.0002"),
    )
    steps: list[Step] = [
        Finish(output=output_record("ok", None, PARTS), dead_letter=letter),
        Continue(state=state, approval_requests=[request]),
    ]
    for step in steps:
        again = STEP.validate_json(STEP.dump_json(step))
        assert type(again) is type(step) and again == step
    finished = STEP.validate_json(STEP.dump_json(steps[0]))
    assert isinstance(finished, Finish)
    assert finished.output.to_json() == steps[0].output.to_json()
