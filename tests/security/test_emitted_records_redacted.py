"""Outputs, dead letters and approval requests carry no secret, and stay valid JSON."""

from __future__ import annotations

import json

from streamagents.operators.agent.emitted_records import ApprovalRequest, DeadLetter, OutputRecord
from streamagents.operators.agent.records import ErrorInfo
from streamagents.serde.chat import TokenUsage

_TOKEN = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
_PASSWORD = "correct-horse-battery"


def test_an_output_whose_answer_repeats_a_token_does_not_carry_it() -> None:
    record = OutputRecord(
        id="r1",
        key="k",
        run_id="run",
        status="ok",
        text=f"The tool said: use {_TOKEN} against https://bot:{_PASSWORD}@git.example/x",
        usage=TokenUsage(),
        model_calls=1,
        tool_calls=1,
        latency_ms=5,
        attributes={"note": f'{{"password": "{_PASSWORD}"}}'},
    )
    line = record.to_json()
    assert _TOKEN not in line and _PASSWORD not in line
    assert json.loads(line)["text"].startswith("The tool said: use [REDACTED]")


def test_a_dead_letter_carries_no_secret_of_its_input_or_reason() -> None:
    received = json.dumps({"id": "r2", "text": "hi", "api_key": _PASSWORD})
    error = ErrorInfo(type="BadRequest", message=f"rejected Authorization: Bearer {_TOKEN}")
    line = DeadLetter.build("run", error, received).to_json()
    assert _TOKEN not in line and _PASSWORD not in line
    letter = json.loads(line)
    assert json.loads(letter["input"])["api_key"] == "[REDACTED]"
    assert letter["id"] == "r2"


def test_an_approval_request_carries_no_secret_of_its_arguments() -> None:
    request = ApprovalRequest(
        call_id="c",
        tool_call_id="t",
        run_id="run",
        input_id="r3",
        key="k",
        tool="deploy",
        arguments={"url": f"https://ops:{_PASSWORD}@deploy.example/"},
        text="",
        requested_ms=1,
        deadline_ms=2,
    )
    line = request.to_json()
    assert _PASSWORD not in line
    assert json.loads(line)["arguments"]["url"] == "https://[REDACTED]@deploy.example/"
