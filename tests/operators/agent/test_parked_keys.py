"""A key whose run is parked for an approval: where its new inputs go, what each run sees of
the key's memory, and the bound on what such a key holds (the rules the engine applies)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from doubles import emitted_json, scripted_runtime
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streamagents.operators.agent import AgentRuntime, RunState, Step, tool
from streamagents.operators.agent.approvals import ApprovalDecision
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.parked_keys import goes_aside, next_ready, refusal, run_of_call
from streamagents.operators.agent.run_state import Continue, Finish
from streamagents.serde.messages import ChatMessage
from streamagents.testing import answer, calls

T0 = 1_000_000


@tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: Order number.
        amount: Amount in euros.
    """
    return f"refunded {amount:g} on {order}"


def runtime_with(tmp_path: Path, *replies: Any, **config: Any) -> AgentRuntime:
    return scripted_runtime(tmp_path, replies, [refund], **config)


def run_pending(runtime: AgentRuntime, step: Step, now: int, history: list[ChatMessage]) -> Step:
    """Perform the pending action with the key's memory and advance, as the engine does."""
    assert step.state is not None
    runtime.clock_ms = lambda: float(now)
    outcome = asyncio.run(runtime.perform(step.state, history))
    return runtime.advance(step.state, outcome, now, history)


def start(runtime: AgentRuntime, input_id: str, text: str, history: list[ChatMessage]) -> Step:
    raw = json.dumps({"id": input_id, "key": "cust-1", "text": text})
    return runtime.start(runtime.parse(raw), history, T0)


def parked_run(tmp_path: Path, started_ms: int, parked: bool) -> RunState:
    """A run of a refund turn: parked, or (decided) ready to go on."""
    runtime = runtime_with(tmp_path, calls(("refund", {"order": "A1", "amount": 30})))
    step = run_pending(runtime, start(runtime, f"in-{started_ms}", "refund", []), T0, [])
    assert step.state is not None and step.state.parked
    state = step.state.model_copy(update={"started_ms": started_ms})
    if parked:
        return state
    call_id = state.pending.approvals[0].call_id  # type: ignore[union-attr]
    decided = runtime.decide(state, ApprovalDecision(call_id=call_id, decision="approve"), T0)
    assert decided.state is not None and not decided.state.parked
    return decided.state


def test_queue_is_the_default_and_separate_run_sets_a_parked_run_aside(tmp_path: Path) -> None:
    state = parked_run(tmp_path, T0, parked=True)
    model = ModelSpec(provider="test", model="scripted")
    assert AgentConfig(model=model).while_parked == "queue"
    assert not goes_aside("queue", state)
    assert goes_aside("separate_run", state)
    ready = parked_run(tmp_path, T0, parked=False)
    assert not goes_aside("separate_run", ready)  # only a run that waits for decisions only


def test_misconfigured_while_parked_and_bound_are_refused() -> None:
    model = ModelSpec(provider="test", model="scripted")
    with pytest.raises(ValidationError, match="queue"):
        AgentConfig(model=model, while_parked="parallel")
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        AgentConfig(model=model, max_inputs_per_parked_key=0)


def test_an_approval_names_the_run_it_belongs_to(tmp_path: Path) -> None:
    state = parked_run(tmp_path, T0, parked=True)
    call_id = state.pending.approvals[0].call_id  # type: ignore[union-attr]
    assert run_of_call(call_id) == state.run_id
    assert run_of_call("no-such-call") == ""


def test_a_key_at_its_bound_refuses_the_next_input_with_the_reason() -> None:
    assert refusal(31, 32, "queue") is None
    error = refusal(32, 32, "queue")
    assert error is not None and error.type == "ParkedKeyFull"
    assert "32 inputs queued behind its parked run" in error.message
    assert "max_inputs_per_parked_key=32" in error.message
    aside = refusal(5, 2, "separate_run")
    assert aside is not None and "5 inputs parked or queued" in aside.message


@given(held=st.integers(0, 10_000), bound=st.integers(1, 10_000))
def test_the_bound_admits_exactly_below_it(held: int, bound: int) -> None:
    assert (refusal(held, bound, "queue") is None) == (held < bound)


def test_the_earliest_ready_run_goes_on_first_parked_ones_never(tmp_path: Path) -> None:
    first = parked_run(tmp_path / "a", T0 + 5, parked=False)
    second = parked_run(tmp_path / "b", T0 + 9, parked=False)
    waiting = parked_run(tmp_path / "c", T0, parked=True)
    assert next_ready([second, waiting, first]) == first
    assert next_ready([waiting]) is None
    assert next_ready([]) is None


def test_a_separate_run_sees_memory_without_the_parked_turn_which_joins_it_on_resume(
    tmp_path: Path,
) -> None:
    """The run the engine drives for a parked key's new input, and the parked run going on
    after it: memory order is the order the runs finish; run ids and events stay apart."""
    runtime = runtime_with(
        tmp_path,
        calls(("refund", {"order": "A1", "amount": 30})),  # run A: parks
        answer("Your address is updated."),  # run B, started while A is parked
        answer("Refunded 30 on A1."),  # run A, after the approval
    )
    before = [ChatMessage.user("earlier question"), ChatMessage(role="assistant", content="hi")]
    parked = run_pending(runtime, start(runtime, "a-1", "refund A1 please", before), T0, before)
    assert parked.state is not None and parked.state.parked

    separate = run_pending(runtime, start(runtime, "b-1", "new address", before), T0, before)
    assert isinstance(separate, Finish) and separate.history is not None
    seen_by_b = [m.content for m in runtime.model.calls[1].messages]  # type: ignore[attr-defined]
    assert "refund A1 please" not in seen_by_b and seen_by_b[-3:] == [
        "earlier question",
        "hi",
        "new address",
    ]

    memory = separate.history  # the key's memory once B finished
    call_id = parked.state.pending.approvals[0].call_id  # type: ignore[union-attr]
    decided = runtime.decide(
        parked.state, ApprovalDecision(call_id=call_id, decision="approve"), T0
    )
    assert isinstance(decided, Continue)  # a decision that goes on never writes memory
    tools_done = run_pending(runtime, decided, T0 + 1, memory)
    done = run_pending(runtime, tools_done, T0 + 2, memory)
    seen_by_a = [m.content for m in runtime.model.calls[2].messages]  # type: ignore[attr-defined]
    assert seen_by_a.index("Your address is updated.") < seen_by_a.index("refund A1 please")
    assert done.history is not None
    contents = [m.content for m in done.history if m.role in ("user", "assistant") and m.content]
    assert contents == [
        "earlier question",
        "hi",
        "new address",
        "Your address is updated.",
        "refund A1 please",
        "Refunded 30 on A1.",
    ]
    outputs = [emitted_json(s.output) for s in (separate, done)]
    assert [o["id"] for o in outputs] == ["b-1", "a-1"]
    assert outputs[0]["run_id"] != outputs[1]["run_id"]
    run_ids = {json.loads(e.json())["run_id"] for e in separate.events}
    assert run_ids == {outputs[0]["run_id"]}
