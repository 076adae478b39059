"""A stateful property test of the whole engine on the in-memory port.

Hypothesis interleaves inputs for several keys (plain, with a tool call, with a call that
needs approval), call completions and unexpected call failures, the passing of time
(polls, approval deadlines, run timeouts), decisions, checkpoints and restores from them,
and finally the end of input, with or without a per-key spend budget that dead-letters or
defers. After every step and at the end it checks what users rely on: at most one run per
key, parked runs and runs deferred by a spend budget hold no call, nothing is answered
twice (after a
restore the sinks hold only committed records and the source replays the rest), and in
the end every input has exactly one output or, when no run could produce one, exactly one
dead letter, in arrival order per key.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from engine_harness import Checkpoint, EngineHarness, harness
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from streamagents.operators.agent import RunState, tool
from streamagents.operators.agent.config import Budgets, SpendBudget
from streamagents.testing import EchoTestModel

KEYS = ("a", "b", "c")


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: Order number.
    """
    return f"{order} delivered"


@tool(requires_approval=True, approval_timeout_s=60)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: Order number.
    """
    return f"refunded {order}"


TEXTS = {"plain": "hello", "tool": "tool:lookup A1", "approval": "tool:refund A2"}


class EngineMachine(RuleBasedStateMachine):
    """One subtask of the agent operator, driven step by step."""

    h: EngineHarness

    def __init__(self) -> None:
        super().__init__()
        self.numbered = 0
        self.checkpoint_taken: Checkpoint | None = None
        self.decided: set[str] = set()

    @initialize(
        while_parked=st.sampled_from(["queue", "separate_run"]),
        max_in_flight=st.integers(1, 3),
        max_waiting=st.integers(1, 4),
        spend=st.sampled_from([None, "dead_letter", "defer"]),
    )
    def start(
        self, while_parked: str, max_in_flight: int, max_waiting: int, spend: str | None
    ) -> None:
        self.separate = while_parked == "separate_run"
        budgets = Budgets()
        if spend is not None:  # one call of EchoTestModel's 5 tokens a minute per key
            window = SpendBudget(tokens=5, window_s=60, on_exceeded=spend)  # type: ignore[arg-type]
            budgets = Budgets(per_key=window)
        self.h = harness(
            Path(tempfile.mkdtemp(prefix="engine-properties-")),
            EchoTestModel(),
            tools=[lookup, refund],
            while_parked=while_parked,
            max_in_flight=max_in_flight,
            max_waiting_inputs=max_waiting,
            budgets=budgets,
        )

    # -- steps -----------------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), kind=st.sampled_from(sorted(TEXTS)))
    def send(self, key: str, kind: str) -> None:
        self.numbered += 1
        self.h.send_input(key, f"{key}-{self.numbered}", TEXTS[kind])

    @precondition(lambda self: bool(self.h.runner.pending))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        call = data.draw(st.sampled_from(self.h.runner.pending))
        self.h.runner.complete(call)

    @precondition(lambda self: bool(self.h.runner.pending))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        call = data.draw(st.sampled_from(self.h.runner.pending))
        self.h.runner.fail(call, RuntimeError("the call broke"))

    @rule(held=st.booleans())
    def hold_slots(self, held: bool) -> None:
        """The calls in flight wait (a model's admission) or go on finishing in waits."""
        self.h.runner.slots_held = held

    @rule(ms=st.sampled_from([1, 200, 1_000, 30_000, 70_000, 400_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)

    @precondition(lambda self: bool(self.undecided()))
    @rule(data=st.data(), verdict=st.sampled_from(["approve", "reject"]))
    def decide(self, data: st.DataObject, verdict: str) -> None:
        request = data.draw(st.sampled_from(self.undecided()))
        self.decided.add(request["call_id"])
        self.h.decide(request["key"], request["call_id"], verdict)

    @rule()
    def checkpoint(self) -> None:
        self.checkpoint_taken = self.h.checkpoint()

    @precondition(lambda self: self.checkpoint_taken is not None)
    @rule()
    def fail_over(self) -> None:
        assert self.checkpoint_taken is not None
        self.h.restore(self.checkpoint_taken)

    def undecided(self) -> list[dict[str, str]]:
        return [r for r in self.h.approval_requests() if r["call_id"] not in self.decided]

    # -- what must always hold -------------------------------------------------------------

    @invariant()
    def one_run_per_key(self) -> None:
        calls = Counter(call.key for call in self.h.runner.pending)
        assert all(n == 1 for n in calls.values()), calls

    @invariant()
    def parked_runs_hold_no_call(self) -> None:
        busy = {call.key for call in self.h.runner.pending}
        for key in KEYS:
            stored = self.h.port.state_of(key).get("run")
            if stored is not None and RunState.model_validate_json(stored).parked:
                assert key not in busy, f"the parked run of {key} holds a call"

    @invariant()
    def deferred_runs_hold_no_call(self) -> None:
        busy = {call.key for call in self.h.runner.pending}
        for key in KEYS:
            if self.h.port.state_of(key).get("spend_deferred") is not None:
                assert key not in busy, f"the deferred run of {key} holds a call"

    @invariant()
    def nothing_answered_twice(self) -> None:
        outputs = Counter(r["id"] for r in self.h.outputs())
        letters = Counter(r["id"] for r in self.h.dead_letters())
        assert max(outputs.values(), default=0) <= 1, outputs
        assert max(letters.values(), default=0) <= 1, letters

    def teardown(self) -> None:
        if not hasattr(self, "h"):
            return
        self.h.runner.slots_held = False  # the waiting calls go out in the end
        self.h.end_input()
        for _ in range(100):
            if not self.h.runner.pending and not self.h.port.timers():
                break
            for call in self.h.runner.pending:
                self.h.runner.complete(call)
            self.h.fire_due()
        assert not self.h.runner.pending, "a call was left in flight after the end of input"
        self.h.close()
        sent = [k for k, line in self.h.sent if '"approval"' not in line]
        inputs = [f"{key}-{n}" for key, n in self._ids()]
        assert len(inputs) == len(sent)
        outputs = [r["id"] for r in self.h.outputs()]
        letters = {r["id"] for r in self.h.dead_letters()}
        for input_id in inputs:
            assert input_id in outputs or input_id in letters, f"{input_id} was never answered"
        assert sorted(outputs) == sorted(set(outputs))
        if not self.separate:  # a set-aside run may answer after later inputs of its key
            for key in KEYS:
                mine = [i for i in outputs if i.startswith(f"{key}-")]
                assert mine == [i for i in inputs if i in mine], f"{key} answered out of order"

    def _ids(self) -> list[tuple[str, int]]:
        """(key, number) of each input line the source holds, in arrival order."""
        found = []
        for key, line in self.h.sent:
            if '"approval"' in line:
                continue
            number = line.split(f'"{key}-', 1)[1].split('"', 1)[0]
            found.append((key, int(number)))
        return found


EngineMachine.TestCase.settings = settings(
    max_examples=75,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_engine_keeps_its_promises = EngineMachine.TestCase
