"""The support-desk example: its refunds park, and its decisions file decides them.

The example's spec, tools, demo model (a test double on the loopback stub) and committed
decisions are driven through the agent runtime the way the engine drives them, so the
decisions file is checked to name the approvals the example's runs ask for.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from doubles import emitted_json
from engine_harness import EngineHarness
from example_jobs import EXAMPLES, example_runtime

from streamagents.connectors.providers import ChatModel
from streamagents.jobs.graph import agent_config
from streamagents.jobs.spec import check_runnable, load_spec
from streamagents.operators.agent import AgentRuntime, Step
from streamagents.operators.agent.approval_steps import name_the_call
from streamagents.operators.agent.approvals import ApprovalDecision, decision_line, parse_line
from streamagents.operators.agent.config import ModelSpec
from streamagents.operators.agent.emitted_records import ApprovalRequest
from streamagents.operators.agent.records import InputRecord
from streamagents.operators.agent.run_state import Continue, Park
from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.messages import ChatMessage, ToolCall

DESK = EXAMPLES / "data" / "desk"


def settle(runtime: AgentRuntime, step: Step, now: int, asked: list[ApprovalRequest]) -> Step:
    """Perform and advance until the run parks or ends; collect its approval requests."""
    while True:
        if isinstance(step, Continue | Park):
            asked += step.approval_requests
        if step.state is None or step.state.parked:
            return step
        outcome = asyncio.run(runtime.perform(step.state, []))
        step = runtime.advance(step.state, outcome, now, [])


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
            decided = parse_line(line, key_field, takes="decisions")
            assert isinstance(decided, tuple)
            key, decision = decided
            states = [s.state for s in parked.values() if s.state and s.state.key == key]
            decision = name_the_call(runtime.tools, decision, states, key)
            assert isinstance(decision, ApprovalDecision) and decision.call_id is not None
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


class RefundFirstTestModel(ChatModel):
    """Test double of another model than the demo: it asks for the refund before looking
    the order up (one call per turn, its own call ids), then answers with what the tools
    said; so its approvals are other events of the run than the demo's."""

    provider = "refund-first-test-double"

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        ticket = next(m.content for m in messages if m.role == "user")
        order = re.search(r"O-\d{4}", ticket)
        amount = re.search(r"(\d+(?:\.\d+)?) EUR", ticket)
        assert order is not None and amount is not None
        asked = [c.name for m in messages for c in m.tool_calls]
        if not asked:
            arguments = {"amount_eur": float(amount.group(1)), "order_id": order.group(0)}
            call = ToolCall(id="r1", name="refund", arguments=arguments)
        elif asked == ["refund"]:
            call = ToolCall(id="l1", name="lookup_order", arguments={"order_id": order.group(0)})
        else:
            said = " / ".join(m.content for m in messages if m.role == "tool")
            return ChatResponse(message=ChatMessage(role="assistant", content=f"done: {said}"))
        return ChatResponse(message=ChatMessage(role="assistant", tool_calls=[call]))

    async def aclose(self) -> None:
        return None


def test_the_decisions_file_decides_the_refunds_of_a_model_calling_tools_in_another_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPPORT_DESK_REFUNDS", str(tmp_path / "refunds"))
    loaded = load_spec(EXAMPLES / "support_desk.yaml", {})
    check_runnable(loaded)
    config = agent_config(loaded, ModelSpec(provider="test", model="refund-first"))
    config = config.model_copy(update={"media_store": str(tmp_path / "media")})
    h = EngineHarness(lambda: AgentRuntime.from_config(config, RefundFirstTestModel()), config)
    try:
        for line in (DESK / "tickets" / "tickets.jsonl").read_text().splitlines():
            record = parse_line(line, config.key_field)
            assert isinstance(record, InputRecord)
            h.send(record.key, line)
        h.settle_all()
        requests = {r["input_id"]: r for r in h.approval_requests()}
        assert [r["tool"] for r in requests.values()] == ["refund", "refund"]
        for line in (DESK / "decisions.jsonl").read_text().splitlines():
            decided = parse_line(line, config.key_field, takes="decisions")
            assert isinstance(decided, tuple)
            key, decision = decided
            assert decision.call_id is None  # named by what the request shows
            h.send(key, decision_line(decision, key))
        h.settle_all()
    finally:
        h.close()
    assert h.dead_letters() == []
    outputs = {o["id"]: o["text"] for o in h.outputs()}
    assert '{"order_id":"O-7310","refunded":true,"amount_eur":129.0}' in outputs["desk-1"]
    assert "rejected by ana@desk: the order is still in transit" in outputs["desk-2"]
    assert [p.name for p in (tmp_path / "refunds").iterdir()] == ["O-7310.json"]
