"""Tool calls that need a person's approval: parking, decisions, deadlines, dead letters."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from doubles import emitted_json, scripted_runtime
from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.operators.agent import AgentRuntime, Step, tool
from streamagents.operators.agent.approvals import (
    ApprovalDecision,
    decision_line,
    forgotten,
    is_decision_line,
    parse_line,
    read_decision_line,
    settled_entry,
    settled_fingerprint,
)
from streamagents.operators.agent.config import AgentConfig, ModelSpec, ToolRef
from streamagents.operators.agent.records import InputError, InputRecord
from streamagents.operators.agent.run_state import Duplicate, Finish, Stale, run_id_for
from streamagents.operators.agent.tools import Tool
from streamagents.operators.telemetry.spans import LiveSpans, SpanRecord, spans_from_events
from streamagents.serde.events import AgentEvent
from streamagents.testing import ScriptedTestModel, answer, calls

T0 = 1_000_000
DAY_MS = 86_400_000
APPROVAL = run_id_for("streamagents", "in-1") + ".0004"
"""The approval id of the first call of the first turn: its tool_request event's id."""
made: list[tuple[str, dict[str, Any]]] = []
"""Calls the tools below actually made, in order."""


@tool(requires_approval=True, allow_edits=True)
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: Order number.
        amount: Amount in euros.
    """
    made.append(("refund", {"order": order, "amount": amount}))
    return f"refunded {amount:g} on {order}"


def lookup(order: str) -> dict:
    """Look an order up.

    Args:
        order: Order number.
    """
    made.append(("lookup", {"order": order}))
    return {"order": order, "status": "delivered"}


@tool(requires_approval=lambda args: args["amount"] > 100, approval_timeout_s=60)
def small_refund(order: str, amount: float) -> str:
    """Refund an order; above 100 euros a person approves.

    Args:
        order: Order number.
        amount: Amount in euros.
    """
    made.append(("small_refund", {"order": order, "amount": amount}))
    return "ok"


@pytest.fixture(autouse=True)
def _clear_made() -> None:
    made.clear()


def runtime_with(tmp_path: Path, *replies: Any, **config: Any) -> AgentRuntime:
    model = ModelSpec(provider="test", model="scripted")
    return scripted_runtime(
        tmp_path, replies, [refund, lookup, small_refund], model=model, **config
    )


def begin(runtime: AgentRuntime, now: int = T0, text: str = "refund A1") -> Step:
    """Start a run and apply its first model call."""
    raw = json.dumps({"id": "in-1", "key": "cust-1", "text": text})
    step = runtime.start(runtime.parse(raw), [], now)
    return run_pending(runtime, step, now)


def run_pending(runtime: AgentRuntime, step: Step, now: int) -> Step:
    """Perform the pending action and advance with it, as the engine does."""
    assert step.state is not None
    runtime.clock_ms = lambda: float(now)
    outcome = asyncio.run(runtime.perform(step.state, []))
    return runtime.advance(step.state, outcome, now, [])


def decision(call_id: str = APPROVAL, verdict: str = "approve", **fields: Any) -> ApprovalDecision:
    return ApprovalDecision(call_id=call_id, decision=verdict, **fields)


def events(*steps: Step) -> list[dict[str, Any]]:
    for event in (e for s in steps for e in s.events):
        AgentEvent.model_validate_json(event.json())
    return [json.loads(e.json()) for s in steps for e in s.events]


def model_requests(runtime: AgentRuntime) -> list[Any]:
    assert isinstance(runtime.model, ScriptedTestModel)
    return runtime.model.calls


def test_a_call_needing_approval_parks_the_run_and_emits_a_request(tmp_path: Path) -> None:
    reply = calls(("refund", {"order": "A1", "amount": 30}))
    reply = reply.model_copy(
        update={"message": reply.message.model_copy(update={"content": "Refunding A1."})}
    )
    runtime = runtime_with(tmp_path, reply)
    step = begin(runtime)
    assert step.state is not None and step.state.parked
    assert step.state.pending.runnable_calls == []
    assert step.state.next_deadline_ms == T0 + DAY_MS  # the agent's default: one day
    assert made == []
    [request] = [emitted_json(r) for r in step.approval_requests]
    assert request == {
        "call_id": APPROVAL,
        "tool_call_id": "call-0",
        "run_id": step.state.run_id,
        "input_id": "in-1",
        "key": "cust-1",
        "tool": "refund",
        "arguments": {"order": "A1", "amount": 30},
        "text": "Refunding A1.",
        "requested_ms": T0,
        "deadline_ms": T0 + DAY_MS,
    }
    requested = [e for e in events(step) if e["event_type"] == "approval_requested"]
    assert requested[0]["payload"]["attributes"]["call_id"] == APPROVAL


def test_approve_runs_the_call_once_and_the_run_finishes(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path, calls(("refund", {"order": "A1", "amount": 30})), answer("Refunded.")
    )
    parked = begin(runtime)
    later = T0 + 3 * DAY_MS // 4
    decided = runtime.decide(parked.state, decision(by="ana"), later)
    assert decided.state is not None and not decided.state.parked
    assert decided.settled == {APPROVAL: decision().fingerprint()}
    assert made == []  # the decision only frees the call; the engine performs it
    after_tool = run_pending(runtime, decided, later + 5)
    assert made == [("refund", {"order": "A1", "amount": 30})]
    done = run_pending(runtime, after_tool, later + 10)
    assert emitted_json(done.output)["status"] == "ok"
    decided_event = next(e for e in events(decided) if e["event_type"] == "approval_decided")
    assert decided_event["payload"]["attributes"]["by"] == "ana"
    assert decided_event["payload"]["attributes"]["decision"] == "approve"
    assert decided_event["timestamp_ms"] == later


def test_reject_gives_the_model_an_error_result_with_the_comment(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path, calls(("refund", {"order": "A1", "amount": 30})), answer("Sorry, no refund.")
    )
    parked = begin(runtime)
    rejected = runtime.decide(
        parked.state, decision(verdict="reject", by="bo", comment="outside 30 days"), T0 + 100
    )
    assert rejected.state is not None and rejected.state.pending.kind == "model"
    done = run_pending(runtime, rejected, T0 + 200)
    assert made == []
    result = model_requests(runtime)[-1].messages[-1]
    assert result.role == "tool" and result.is_error
    assert "rejected by bo: outside 30 days" in result.content
    assert emitted_json(done.output)["text"] == "Sorry, no refund."


def test_edited_arguments_are_used_and_recorded_as_edited(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path, calls(("refund", {"order": "A1", "amount": 300})), answer("Refunded part.")
    )
    parked = begin(runtime)
    edit = decision(by="ana", arguments={"order": "A1", "amount": 100})
    decided = runtime.decide(parked.state, edit, T0 + 100)
    run_pending(runtime, decided, T0 + 200)
    assert made == [("refund", {"order": "A1", "amount": 100})]
    event = next(e for e in events(decided) if e["event_type"] == "approval_decided")
    assert event["payload"]["attributes"]["edited_arguments"] == "true"
    assert event["payload"]["tool_calls"][0]["arguments"] == {"order": "A1", "amount": 100}
    plain = runtime.decide(parked.state, decision(), T0 + 100)
    event = next(e for e in events(plain) if e["event_type"] == "approval_decided")
    assert event["payload"]["attributes"]["edited_arguments"] == "false"


def test_the_deadline_rejects_the_call_as_timed_out_and_the_run_goes_on(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path, calls(("small_refund", {"order": "A1", "amount": 500})), answer("No answer yet.")
    )
    parked = begin(runtime)
    assert parked.state is not None and parked.state.next_deadline_ms == T0 + 60_000
    early = runtime.expire(parked.state, T0 + 59_999)
    assert early.state == parked.state and early.events == []
    expired = runtime.expire(parked.state, T0 + 60_000)
    assert expired.settled == {APPROVAL: "expired"}
    assert next(e["event_type"] for e in events(expired)) == "approval_expired"
    done = run_pending(runtime, expired, T0 + 60_010)
    result = model_requests(runtime)[-1].messages[-1]
    assert result.is_error and "no decision came within 60 s" in result.content
    assert made == [] and emitted_json(done.output)["status"] == "ok"


def dead_letter(step: Step) -> dict[str, Any]:
    assert step.dead_letter is not None
    return emitted_json(step.dead_letter)


def test_decisions_for_unknown_decided_or_expired_calls_are_dead_letters(tmp_path: Path) -> None:
    runtime = runtime_with(tmp_path, calls(("refund", {"order": "A1", "amount": 30})))
    parked = begin(runtime)
    unknown = runtime.decide(parked.state, decision(call_id="call-9"), T0)
    assert dead_letter(unknown)["error_type"] == "UnknownCall"
    assert dead_letter(unknown)["stage"] == "approval"
    assert unknown.state == parked.state
    no_run = runtime.decide(None, decision(), T0, key="cust-1")
    assert dead_letter(no_run)["error_type"] == "UnknownCall"
    assert dead_letter(no_run)["key"] == "cust-1"
    approved = runtime.decide(parked.state, decision(by="ana"), T0 + 1)
    conflict = runtime.decide(approved.state, decision(verdict="reject", by="bo"), T0 + 2)
    assert dead_letter(conflict)["error_type"] == "AlreadyDecided"
    assert conflict.state == approved.state
    late = runtime.decide(None, decision(), T0 + 2 * DAY_MS, settled="expired")
    assert dead_letter(late)["error_type"] == "ApprovalExpired"
    expired = runtime.expire(parked.state, T0 + DAY_MS)
    late_in_run = runtime.decide(expired.state, decision(), T0 + DAY_MS + 1)
    assert late_in_run.state is not None  # the run went on to its next model call


def test_a_duplicate_decision_is_ignored_during_and_after_the_run(tmp_path: Path) -> None:
    runtime = runtime_with(tmp_path, calls(("refund", {"order": "A1", "amount": 30})))
    parked = begin(runtime)
    approved = runtime.decide(parked.state, decision(by="ana"), T0 + 1)
    again = runtime.decide(approved.state, decision(by="ana"), T0 + 2)
    assert isinstance(again, Duplicate) and again.events == []
    assert again.state == approved.state
    after = runtime.decide(None, decision(by="someone"), T0 + 3, settled=approved.settled[APPROVAL])
    assert isinstance(after, Duplicate)


def test_in_a_mixed_turn_the_other_call_runs_at_once(tmp_path: Path) -> None:
    turn = calls(("refund", {"order": "A1", "amount": 30}), ("lookup", {"order": "A1"}))
    runtime = runtime_with(tmp_path, turn, answer("Done."))
    started = begin(runtime)
    assert started.state is not None and not started.state.parked
    assert [c.name for c in started.state.pending.runnable_calls] == ["lookup"]
    landed = run_pending(runtime, started, T0 + 10)
    assert made == [("lookup", {"order": "A1"})]
    assert landed.state is not None and landed.state.parked
    assert landed.state.pending.kind == "tools"  # the turn waits for the refund
    approved = runtime.decide(landed.state, decision(), T0 + 20)
    turn_done = run_pending(runtime, approved, T0 + 30)
    assert [name for name, _ in made] == ["lookup", "refund"]
    run_pending(runtime, turn_done, T0 + 40)
    sent = model_requests(runtime)[-1].messages
    assert [m.tool_call_id for m in sent if m.role == "tool"] == ["call-0", "call-1"]


def test_a_decision_while_the_other_call_runs_waits_for_its_result(tmp_path: Path) -> None:
    turn = calls(("refund", {"order": "A1", "amount": 30}), ("lookup", {"order": "A1"}))
    runtime = runtime_with(tmp_path, turn, answer("Done."))
    started = begin(runtime)
    assert started.state is not None
    runtime.clock_ms = lambda: float(T0 + 5)
    lookup_outcome = asyncio.run(runtime.perform(started.state, []))
    approved = runtime.decide(started.state, decision(), T0 + 6)  # lookup still "running"
    landed = runtime.advance(approved.state, lookup_outcome, T0 + 10, [])
    assert landed.state is not None and not isinstance(landed, Stale)
    assert [c.name for c in landed.state.pending.runnable_calls] == ["refund"]
    stale = runtime.advance(landed.state, lookup_outcome, T0 + 11, [])
    assert isinstance(stale, Stale)  # the same result again is not applied twice


def test_a_predicate_decides_per_call(tmp_path: Path) -> None:
    turn = calls(("small_refund", {"order": "A1", "amount": 50}))
    runtime = runtime_with(tmp_path, turn, answer("Refunded."))
    step = begin(runtime)
    assert step.approval_requests == []
    run_pending(runtime, step, T0 + 10)
    assert made == [("small_refund", {"order": "A1", "amount": 50})]

    def broken(args: dict[str, Any]) -> bool:
        raise KeyError("amount")

    guarded = Tool.from_function(lookup, requires_approval=broken)
    assert guarded.needs_approval({"order": "A1"})  # a predicate that fails asks a person


def test_time_parked_does_not_count_towards_the_run_timeout(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path,
        calls(("refund", {"order": "A1", "amount": 30})),
        answer("Refunded."),
        budgets={"run_timeout_s": 10},
    )
    parked = begin(runtime)
    decided = runtime.decide(parked.state, decision(), T0 + DAY_MS - 1)
    assert decided.state is not None and decided.state.parked_ms == DAY_MS - 1
    assert decided.state.timeout_base_ms == T0 + DAY_MS - 1
    done = run_pending(runtime, run_pending(runtime, decided, T0 + DAY_MS + 5), T0 + DAY_MS + 9)
    assert emitted_json(done.output)["status"] == "ok"


def test_a_parked_run_abandoned_at_the_end_of_input_leaves_its_input(tmp_path: Path) -> None:
    runtime = runtime_with(tmp_path, calls(("refund", {"order": "A1", "amount": 30})))
    parked = begin(runtime)
    assert parked.state is not None
    ended = runtime.abandon_parked(parked.state, T0 + 5)
    assert isinstance(ended, Finish)
    letter = dead_letter(ended)
    assert letter["error_type"] == "ApprovalPending" and APPROVAL in letter["reason"]
    assert json.loads(letter["input"])["text"] == "refund A1"
    assert emitted_json(ended.output)["status"] == "error"


def test_a_parked_run_state_is_small(tmp_path: Path) -> None:
    runtime = runtime_with(tmp_path, calls(("refund", {"order": "A1", "amount": 30})))
    parked = begin(runtime)
    assert parked.state is not None
    assert len(parked.state.model_dump_json()) < 2048


def test_yaml_tool_refs_set_or_clear_the_approval_rule(tmp_path: Path) -> None:
    config = AgentConfig(
        model=ModelSpec(provider="gemini", model="m", options={"api_key": "test-key"}),
        media_store=str(tmp_path / "media"),
        tools=[
            ToolRef(ref=f"{__name__}:lookup", approval="required", approval_timeout_s=5),
            ToolRef(ref=f"{__name__}:refund", approval="none"),
            f"{__name__}:small_refund",
        ],
    )
    tools = AgentRuntime.from_config(config).tools
    looked = tools.get("lookup")
    assert looked is not None and looked.needs_approval({}) and looked.approval_timeout_s == 5
    refunds = tools.get("refund")
    assert refunds is not None and not refunds.needs_approval({"amount": 1e9})
    small = tools.get("small_refund")
    assert small is not None and small.needs_approval({"amount": 101})
    with pytest.raises(ValueError, match="approval_timeout_s applies only"):
        ToolRef(ref="a.b:c", approval="none", approval_timeout_s=3)


def test_a_line_with_approval_is_a_decision() -> None:
    line = '{"customer": {"id": "c1"}, "approval": {"call_id": "x", "decision": "reject"}}'
    key, parsed = parse_line(line, "customer.id")  # type: ignore[misc]
    assert key == "c1" and parsed.decision == "reject"
    canonical = decision_line(parsed, key)
    assert is_decision_line(canonical) and read_decision_line(canonical) == parsed
    ordinary = parse_line('{"key": "k", "text": "hi"}', "key")
    assert isinstance(ordinary, InputRecord) and not is_decision_line('{"key": "k"}')
    for bad, rule in [
        ('{"key": "k", "approval": "yes"}', "approval must be an object"),
        ('{"key": "k", "approval": {"call_id": "x", "decision": "maybe"}}', "approval.decision"),
        ('{"key": "k", "approval": {"decision": "approve"}}', "approval: name the call by"),
        ('{"key": "k", "approval": {"call_id": "x", "tool": "t", "decision": "approve"}}', "both"),
        ('{"key": "k", "approval": {"call_id": "x", "match": {}, "decision": "approve"}}', "match"),
        ('{"approval": {"call_id": "x", "decision": "approve"}}', "key field"),
        ('{"key": "k", "approval": {"call_id": "x", "decision": "approve", "x": 1}}', "x"),
    ]:
        with pytest.raises(InputError, match=rule):
            parse_line(bad, "key")


def test_a_repeated_model_call_id_gets_a_new_approval_id(tmp_path: Path) -> None:
    refund_call = ("refund", {"order": "A1", "amount": 30})
    runtime = runtime_with(tmp_path, calls(refund_call), calls(refund_call), answer("Twice."))
    first = begin(runtime)
    approved = runtime.decide(first.state, decision(), T0 + 1)
    second = run_pending(runtime, run_pending(runtime, approved, T0 + 2), T0 + 3)
    [request] = [emitted_json(r) for r in second.approval_requests]
    assert request["tool_call_id"] == "call-0" and request["call_id"] != APPROVAL
    old = runtime.decide(second.state, decision(), T0 + 4, settled=approved.settled[APPROVAL])
    # turn 2's call is still waiting
    assert isinstance(old, Duplicate) and old.state == second.state
    assert len(made) == 1


def test_a_key_forgets_its_oldest_settled_approvals_beyond_the_bound() -> None:
    entries = [(f"a{n}", settled_entry("approve:x", 1000 + n)) for n in (5, 1, 3, 2, 4)]
    assert forgotten(entries, 3) == ["a1", "a2"]
    assert forgotten(entries, 5) == []
    assert settled_fingerprint(settled_entry("expired", 7)) == "expired"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    approval=JSON_VALUES | st.fixed_dictionaries({"call_id": JSON_VALUES, "decision": JSON_VALUES}),
    key=JSON_VALUES,
)
def test_any_line_with_approval_is_a_decision_or_an_input_error(approval: Any, key: Any) -> None:
    line = json.dumps({"key": key, "approval": approval})
    try:
        parsed = parse_line(line, "key")
    except InputError:
        return
    assert isinstance(parsed, tuple)
    found_key, found = parsed
    canonical = decision_line(found, found_key)
    assert is_decision_line(canonical) and read_decision_line(canonical) == found
    assert parse_line(
        json.dumps({"key": key, "approval": json.loads(canonical)["approval"]}), "key"
    )


def test_hostile_decisions_are_input_errors_naming_the_rule() -> None:
    huge = json.dumps({"key": "k", "approval": {"call_id": "x" * 300, "decision": "approve"}})
    deep = '{"key": "k", "approval": {"call_id": "x", "decision": "approve", "arguments": ' + (
        '{"a": ' * 100 + "1" + "}" * 100 + "}}"
    )
    for line, rule in [
        (huge, "call_id"),
        (deep, "deeper than"),
        ('{"key": "k", "approval": {"call_id": "x", "decision": "approve", "by": NaN}}', "NaN"),
        ('{"key": "k", "approval": {"call_id": "\\ud800", "decision": "approve"}}', "surrogate"),
    ]:
        with pytest.raises(InputError, match=rule):
            parse_line(line, "key")


def _run_events(*steps: Step) -> list[AgentEvent]:
    return [AgentEvent.model_validate_json(e.json()) for s in steps for e in s.events]


def _approval_span(spans: list[SpanRecord]) -> SpanRecord:
    (span,) = [s for s in spans if s.name.startswith("await_approval")]
    return span


def test_an_approval_wait_is_a_span_from_request_to_decision(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path, calls(("refund", {"order": "A1", "amount": 30})), answer("Refunded.")
    )
    raw = json.dumps({"id": "in-1", "key": "cust-1", "text": "refund A1"})
    started = runtime.start(runtime.parse(raw), [], T0)
    parked = run_pending(runtime, started, T0)
    decided = runtime.decide(parked.state, decision(by="ana", comment="fine"), T0 + 5_000)
    after_tool = run_pending(runtime, decided, T0 + 5_005)
    done = run_pending(runtime, after_tool, T0 + 5_010)
    steps = [started, parked, decided, after_tool, done]
    log = _run_events(*steps)

    spans = spans_from_events(log)
    wait = _approval_span(spans)
    root = next(s for s in spans if s.parent_span_id is None)
    assert wait.name == "await_approval refund" and wait.parent_span_id == root.span_id
    assert (wait.start_ns, wait.end_ns) == (T0 * 1_000_000, (T0 + 5_000) * 1_000_000)
    assert wait.attributes["gen_ai.tool.name"] == "refund"
    assert wait.attributes["streamagents.approval.call_id"] == APPROVAL
    assert wait.attributes["streamagents.approval.decision"] == "approve"
    assert wait.attributes["streamagents.approval.timed_out"] is False
    assert wait.attributes["streamagents.approval.deadline_ms"] == T0 + DAY_MS
    assert not any("ana" in str(v) or "fine" in str(v) for v in wait.attributes.values())
    captured = _approval_span(spans_from_events(log, capture_content=True))
    assert captured.attributes["streamagents.approval.by"] == "ana"
    assert captured.attributes["streamagents.approval.comment"] == "fine"
    assert captured.span_id == wait.span_id

    live = LiveSpans()
    sent = [span for step in steps for span in live.add(_run_events(step))]
    sent += live.end(root.attributes["streamagents.run_id"])  # type: ignore[arg-type]
    assert sorted(sent, key=lambda s: s.span_id) == sorted(spans, key=lambda s: s.span_id)
    assert _approval_span(sent) == wait

    restored = LiveSpans()  # the request was emitted before a restore: the decision opens it
    again = _approval_span(restored.add(_run_events(decided)))
    assert (again.trace_id, again.span_id) == (wait.trace_id, wait.span_id)
    assert again.end_ns == wait.end_ns
    assert again.attributes["streamagents.approval.decision"] == "approve"


def test_an_expired_approval_is_a_timed_out_span(tmp_path: Path) -> None:
    runtime = runtime_with(
        tmp_path, calls(("small_refund", {"order": "A1", "amount": 500})), answer("No answer.")
    )
    parked = begin(runtime)
    expired = runtime.expire(parked.state, T0 + 60_000)
    wait = _approval_span(spans_from_events(_run_events(parked, expired), capture_content=True))
    assert wait.name == "await_approval small_refund"
    assert wait.attributes["streamagents.approval.timed_out"] is True
    assert wait.attributes["streamagents.approval.decision"] == "expired"
    assert "streamagents.approval.by" not in wait.attributes
    assert (wait.end_ns - wait.start_ns) == 60_000 * 1_000_000
