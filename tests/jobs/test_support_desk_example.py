"""The support-desk example: its refunds park, and its decisions file decides them.

The example's spec, tools, demo model (a test double on the loopback stub) and committed
decisions are driven through the agent runtime the way the engine drives them, so the
decisions file is checked to name the approvals the example's runs ask for.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from doubles import emitted_json
from example_jobs import EXAMPLES, example_runtime

from streamagents.operators.agent import AgentRuntime, Step
from streamagents.operators.agent.approvals import parse_line
from streamagents.operators.agent.emitted_records import ApprovalRequest
from streamagents.operators.agent.records import InputRecord

DESK = EXAMPLES / "data" / "desk"


def settle(runtime: AgentRuntime, step: Step, now: int, asked: list[ApprovalRequest]) -> Step:
    """Perform and advance until the run parks or ends; collect its approval requests."""
    asked += step.approval_requests
    while step.state is not None and not step.state.parked:
        outcome = asyncio.run(runtime.perform(step.state, []))
        step = runtime.advance(step.state, outcome, now, [])
        asked += step.approval_requests
    return step


def test_the_decisions_file_approves_one_refund_and_rejects_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPPORT_DESK_REFUNDS", str(tmp_path / "refunds"))
    now = int(time.time() * 1000)
    with example_runtime("support_desk.yaml", tmp_path, now) as (runtime, loaded):
        key_field = loaded.spec.key
        parked: dict[str, Step] = {}
        requests: dict[str, dict] = {}
        for line in (DESK / "tickets" / "tickets.jsonl").read_text().splitlines():
            record = parse_line(line, key_field)
            assert isinstance(record, InputRecord)
            asked: list[ApprovalRequest] = []
            step = settle(runtime, runtime.start(record, [], now), now, asked)
            assert step.state is not None and step.state.parked, record.id
            [request] = [emitted_json(r) for r in asked]
            assert request["tool"] == "refund"
            parked[request["call_id"]] = step
            requests[record.id] = request
        outputs = {}
        for line in (DESK / "decisions.jsonl").read_text().splitlines():
            decided = parse_line(line, key_field)
            assert isinstance(decided, tuple)
            key, decision = decided
            before = parked[decision.call_id]
            assert before.state is not None and before.state.key == key
            decided_step = runtime.decide(before.state, decision, now + 1, key=key)
            step = settle(runtime, decided_step, now, [])
            assert step.output is not None
            outputs[emitted_json(step.output)["id"]] = emitted_json(step.output)
    assert requests["desk-1"]["arguments"] == {"order_id": "O-7310", "amount_eur": 129.0}
    assert "129.0 EUR refunded on O-7310" in outputs["desk-1"]["text"]
    assert "the refund was not made" in outputs["desk-2"]["text"]
    assert "refund after delivery" in outputs["desk-2"]["text"]
    assert [p.name for p in (tmp_path / "refunds").iterdir()] == ["O-7310.json"]
