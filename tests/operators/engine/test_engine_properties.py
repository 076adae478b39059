"""A stateful property test of the whole engine on the in-memory port.

Hypothesis interleaves inputs for several keys (plain, with a tool call, with a call that
needs approval, scheduling a follow-up), call completions and unexpected call failures,
the passing of time (polls, approval deadlines, run timeouts, follow-ups coming due,
memory expiring), decisions, checkpoints and restores from them, and the end of input
(drained at once, and maybe followed by a restore from a checkpoint taken before it, after
which the source replays and the input ends again), with or without a per-key spend
budget that dead-letters or defers and a memory TTL. After every step it checks what users
rely on: at most one run per key; parked runs and runs deferred by a spend budget hold no
call; nothing is answered twice (after a restore the sinks hold only committed records and
the source replays the rest); the subtask's count of waiting inputs (the `waiting_inputs`
metric) never exceeds what the keys' queues hold, equals it in an attempt that restored
nothing, and after a restore covers every key the attempt was sent a line for (a restored
queue counts once its key is touched); an idle key keeps nothing but its history (and its
settled approvals and spend windows) and no end-of-input timer, and with a memory TTL its
history has its cleanup timer and is gone once time passes its expiry; committed event ids
are unique and each run's event sequence numbers increase. In the end every input has
exactly one output or, when no run could produce one, exactly one dead letter, in arrival
order per key; every follow-up scheduled ran, was cancelled by a later input of its key,
or became a dead letter at the end of input (exactly one of these); and no input counts as
waiting.
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
from runtime_tools import lookup, refund

from streamagents.operators.agent import RunState
from streamagents.operators.agent.config import (
    Budgets,
    FollowupConfig,
    MemoryConfig,
    SpendBudget,
)
from streamagents.operators.engine.memory_port import DueTimer
from streamagents.testing import EchoTestModel

KEYS = ("a", "b", "c")

BUSY_STATE = ("run", "queue_tail", "followups", "parked_aside", "spend_deferred")
"""Keyed state that says a key has something to finish (a run, waiting inputs, ...)."""

HISTORY_STATE = {"history", "cleanup_at", "key_runs", "inputs_without_id"}
"""Keyed state an idle key keeps: its history, the history's expiry, and the numbering
of its runs and id-less inputs (which expire with the history)."""

KEPT_STATE = {"approvals_settled", "spend_key", "spend_tenant"}
"""Keyed state a key keeps past its memory's expiry: how its latest approvals were
settled (docs/approvals.md) and its spend windows."""


TEXTS = {
    "plain": "hello",
    "tool": "tool:lookup A1",
    "approval": "tool:refund A2",
    "followup": "followup:90 look again",
}


class EngineMachine(RuleBasedStateMachine):
    """One subtask of the agent operator, driven step by step."""

    h: EngineHarness

    def __init__(self) -> None:
        super().__init__()
        self.numbered = 0
        self.checkpoint_taken: Checkpoint | None = None
        self.decided: set[str] = set()
        self.ended = False
        """Whether the input has ended in this attempt (it was drained at once)."""
        self.attempt_sent = 0
        """How many of the source's lines were sent before this attempt's replay."""

    @initialize(
        while_parked=st.sampled_from(["queue", "separate_run"]),
        max_in_flight=st.integers(1, 3),
        max_waiting=st.integers(1, 4),
        spend=st.sampled_from([None, "dead_letter", "defer"]),
        ttl_s=st.sampled_from([None, 60.0]),
        cancel_on_input=st.booleans(),
    )
    def start(
        self,
        while_parked: str,
        max_in_flight: int,
        max_waiting: int,
        spend: str | None,
        ttl_s: float | None,
        cancel_on_input: bool,
    ) -> None:
        self.separate = while_parked == "separate_run"
        self.ttl_s = ttl_s
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
            memory=MemoryConfig(ttl_seconds=ttl_s),
            followups=FollowupConfig(enabled=True, cancel_on_input=cancel_on_input),
        )

    # -- steps -----------------------------------------------------------------------------

    @precondition(lambda self: not self.ended)
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
        if self.ttl_s is None or self.ended:
            return  # (at the end of input processing-time timers no longer fire)
        now = self.h.port.now_ms()
        for key in self.idle_keys():  # its memory not expired yet, or gone
            state = self.h.port.state_of(key)
            if "cleanup_at" in state:
                assert state["cleanup_at"] > now, f"idle {key} kept its memory past its expiry"
            else:
                kept = HISTORY_STATE & state.keys()
                assert not kept, f"idle {key} keeps {sorted(kept)} without an expiry"

    @precondition(lambda self: not self.ended and bool(self.undecided()))
    @rule(data=st.data(), verdict=st.sampled_from(["approve", "reject"]))
    def decide(self, data: st.DataObject, verdict: str) -> None:
        request = data.draw(st.sampled_from(self.undecided()))
        self.decided.add(request["call_id"])
        self.h.decide(request["key"], request["call_id"], verdict)

    @precondition(lambda self: not self.ended)
    @rule()
    def checkpoint(self) -> None:
        self.checkpoint_taken = self.h.checkpoint()

    @precondition(lambda self: self.checkpoint_taken is not None)
    @rule()
    def fail_over(self) -> None:
        assert self.checkpoint_taken is not None
        self.attempt_sent = self.checkpoint_taken.lines_sent
        self.ended = False  # the checkpoint was taken before any end of input
        self.h.restore(self.checkpoint_taken)

    @precondition(lambda self: not self.ended and self.checkpoint_taken is not None)
    @rule()
    def end_input(self) -> None:
        """The bounded input ends and the subtask drains (no checkpoint is taken meanwhile),
        to be restored from a checkpoint taken before (or to end there: see `teardown`)."""
        self.ended = True
        self.drain()

    def drain(self) -> None:
        """End the input and finish what the keys hold, completing every call."""
        self.h.runner.slots_held = False  # the waiting calls go out in the end
        self.h.end_input()
        for _ in range(100):
            if not self.h.runner.pending and not self.event_timers():
                break
            for call in self.h.runner.pending:
                self.h.runner.complete(call)
            self.h.fire_due()
        assert not self.h.runner.pending, "a call was left in flight after the end of input"
        assert not self.event_timers(), "an end-of-input timer was left after the drain"

    def event_timers(self) -> list[DueTimer]:
        """The event-time timers registered (at the end of input: the drain's)."""
        return [timer for timer in self.h.port.timers() if timer.event_time]

    def undecided(self) -> list[dict[str, str]]:
        return [r for r in self.h.approval_requests() if r["call_id"] not in self.decided]

    def idle_keys(self) -> list[str]:
        """The keys with state or timers but nothing to finish: no call, run, waiting
        input or follow-up, parked or deferred run."""
        busy = {call.key for call in self.h.runner.pending}
        return [
            key
            for key in sorted(self.h.port.keys_with_state())
            if key not in busy and not set(BUSY_STATE) & set(self.h.port.state_of(key))
        ]

    def queued(self, key: str) -> int:
        """How many input lines the key's queue holds."""
        return len(self.h.port.state_of(key).get("queue", {}))

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

    @invariant()
    def waiting_inputs_are_what_the_queues_hold(self) -> None:
        """The count never exceeds the lines queued; a restored queue counts once its key
        is touched, so it is exact for the keys this attempt was sent a line for (and for
        all keys when the attempt restored nothing)."""
        waiting = self.h.count("waiting_inputs")
        queued = {key: self.queued(key) for key in self.h.port.keys_with_state()}
        assert 0 <= waiting <= sum(queued.values()), (waiting, queued)
        if self.h.restores == 0:
            assert waiting == sum(queued.values()), (waiting, queued)
            return
        sent = {k for k, line in self.h.sent[self.attempt_sent :] if '"approval"' not in line}
        assert waiting >= sum(n for key, n in queued.items() if key in sent), (waiting, queued)

    @invariant()
    def an_idle_key_keeps_nothing_but_its_history(self) -> None:
        """Nor an end-of-input timer (else every key ever seen would keep one); with a
        memory TTL its history has its cleanup timer (until the input ends)."""
        kept = HISTORY_STATE | KEPT_STATE
        held = {timer.key for timer in self.event_timers()}
        timers = self.h.port.timers()
        for key in self.idle_keys():
            state = self.h.port.state_of(key)
            assert set(state) <= kept, f"idle {key} keeps {set(state) - kept}"
            assert key not in held, f"idle {key} holds an end-of-input timer"
            if self.ttl_s is not None and not self.ended and "history" in state:
                cleanup = DueTimer(state.get("cleanup_at", -1), False, key)
                assert cleanup in timers, f"idle {key}'s history has no cleanup timer"

    @invariant()
    def event_ids_are_unique_and_sequences_increase(self) -> None:
        events = self.h.records("events")
        ids = Counter(e["event_id"] for e in events)
        assert max(ids.values(), default=0) <= 1, [i for i, n in ids.items() if n > 1]
        last: dict[str, int] = {}
        for event in events:
            run, sequence = event["run_id"], event["sequence"]
            assert sequence > last.get(run, 0), f"{run}: {sequence} after {last.get(run)}"
            last[run] = sequence

    def teardown(self) -> None:
        if not hasattr(self, "h"):
            return
        if not self.ended:
            self.drain()
        assert self.h.count("waiting_inputs") == 0, "inputs count as waiting after the end"
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
        self._check_followups(set(outputs) | letters)

    def _check_followups(self, answered: set[str]) -> None:
        """Every follow-up scheduled ran (an output or a dead letter), was cancelled by a
        later input of its key, or was dead-lettered at the end of input: exactly one."""
        events = self.h.records("events")
        pending = Counter(
            r["id"] for r in self.h.dead_letters() if r["error_type"] == "FollowupPending"
        )
        scheduled = [
            e["payload"]["attributes"]["followup_id"]
            for e in events
            if e["event_type"] == "followup_scheduled"
        ]
        cancelled = Counter(
            e["payload"]["attributes"]["followup_id"]
            for e in events
            if e["event_type"] == "followup_cancelled"
        )
        assert len(scheduled) == len(set(scheduled)), scheduled
        for followup_id in scheduled:
            line_id = f"followup-{followup_id}"
            ran = line_id in answered - set(pending)
            ends = (ran, pending[line_id], cancelled[followup_id])
            assert sum(ends) == 1, (followup_id, ends)

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
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_engine_keeps_its_promises = EngineMachine.TestCase
