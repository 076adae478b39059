"""A stateful property test of a job of two agent operator subtasks on in-memory ports.

The keys are assigned to the two subtasks by a fixed map and each tenant has a key on
each; hypothesis routes inputs (plain, with a tool call, with a call that needs approval)
and decisions to their key's subtask, completes and fails calls, lets time pass on both,
checkpoints both at once and restores both from such a checkpoint, either as they were or
rescaled (every key's state and timers moved to the other subtask's snapshot), under a
per-tenant spend budget (each subtask allows 1/2 of it) that dead-letters or defers.
After every step it checks: each subtask's `waiting_inputs` count is what its own queues
hold (exact until the first restore, then bounded as in test_engine_properties.py); no
key has state or timers on both subtasks; nothing is answered twice across the job;
event ids are unique across the job and each run's sequence numbers increase on each
subtask and are unique across them; and no tenant's model call started while the spend
it made on both subtasks within the budget's window already reached its budget. In the
end every input has exactly one answer (an output or a dead letter) across the job.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from engine_harness import EngineHarness, harness
from engine_job import EngineJob, JobCheckpoint
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from runtime_tools import lookup, refund

from streamagents.operators.agent.config import Budgets, TenantSpendBudget
from streamagents.testing import EchoTestModel

OWNER = {"a": 0, "b": 0, "c": 1, "d": 1}
"""Which subtask owns each key (Flink assigns key groups by hash; a fixed map here)."""

SWAPPED = {key: 1 - owner for key, owner in OWNER.items()}
"""The ownership after a rescale that swaps every key's subtask."""

TENANT = {"a": "t1", "c": "t1", "b": "t2", "d": "t2"}
"""Each tenant has one key on each subtask."""

BUDGET_TOKENS = 10
"""The tenant's budget: two of EchoTestModel's 5-token calls a minute, one per subtask."""

WINDOW_MS = 60_000

TEXTS = {"plain": "hello", "tool": "tool:lookup A1", "approval": "tool:refund A2"}


def tokens(response: dict[str, Any]) -> int:
    """The tokens a chat_response event's call spent."""
    usage = response["payload"]["usage"]
    return int(usage["input_tokens"] + usage["output_tokens"])


class JobMachine(RuleBasedStateMachine):
    """Two subtasks of the agent operator, driven step by step."""

    job: EngineJob

    def __init__(self) -> None:
        super().__init__()
        self.numbered = 0
        self.checkpoint_taken: JobCheckpoint | None = None
        self.decided: set[str] = set()
        self.attempt_sent: list[int] = [0, 0]
        """How many lines each subtask was sent before this attempt's replay."""

    @initialize(
        max_in_flight=st.integers(1, 3),
        max_waiting=st.integers(1, 4),
        spend=st.sampled_from(["dead_letter", "defer"]),
    )
    def start(
        self, max_in_flight: int, max_waiting: int, spend: Literal["dead_letter", "defer"]
    ) -> None:
        budget = TenantSpendBudget(
            tokens=BUDGET_TOKENS, window_s=WINDOW_MS // 1000, on_exceeded=spend, field="tenant"
        )
        subtasks = [
            harness(
                Path(tempfile.mkdtemp(prefix="engine-subtasks-")),
                EchoTestModel(),
                tools=[lookup, refund],
                parallelism=2,
                max_in_flight=max_in_flight,
                max_waiting_inputs=max_waiting,
                budgets=Budgets(per_tenant=budget),
            )
            for _ in range(2)
        ]
        self.job = EngineJob(subtasks, OWNER)

    @property
    def subtasks(self) -> list[EngineHarness]:
        return self.job.subtasks

    # -- steps -----------------------------------------------------------------------------

    @rule(key=st.sampled_from(sorted(OWNER)), kind=st.sampled_from(sorted(TEXTS)))
    def send(self, key: str, kind: str) -> None:
        self.numbered += 1
        self.job.send_input(key, f"{key}-{self.numbered}", TEXTS[kind], tenant=TENANT[key])

    @precondition(lambda self: any(h.runner.pending for h in self.subtasks))
    @rule(data=st.data(), fails=st.booleans())
    def finish(self, data: st.DataObject, fails: bool) -> None:
        """A call completes, or fails with an unexpected error."""
        runner = data.draw(st.sampled_from([h.runner for h in self.subtasks if h.runner.pending]))
        call = data.draw(st.sampled_from(runner.pending))
        if fails:
            runner.fail(call, RuntimeError("the call broke"))
        else:
            runner.complete(call)

    @rule(subtask=st.integers(0, 1), held=st.booleans())
    def hold_slots(self, subtask: int, held: bool) -> None:
        """A subtask's calls in flight wait (a model's admission) or go on finishing."""
        self.subtasks[subtask].runner.slots_held = held

    @rule(ms=st.sampled_from([1, 1_000, 30_000, 70_000]))
    def advance(self, ms: int) -> None:
        self.job.advance(ms)

    @precondition(lambda self: bool(self.undecided()))
    @rule(data=st.data(), verdict=st.sampled_from(["approve", "reject"]))
    def decide(self, data: st.DataObject, verdict: str) -> None:
        request = data.draw(st.sampled_from(self.undecided()))
        self.decided.add(request["call_id"])
        self.job.decide(request["key"], request["call_id"], verdict)

    @rule()
    def checkpoint(self) -> None:
        self.checkpoint_taken = self.job.checkpoint()

    @precondition(lambda self: self.checkpoint_taken is not None)
    @rule(rescale=st.booleans())
    def fail_over(self, rescale: bool) -> None:
        """Both subtasks restart from the checkpoint, maybe with the keys' owners swapped."""
        taken = self.checkpoint_taken
        assert taken is not None
        self.attempt_sent = [part.lines_sent for part in taken.parts]
        owner = {key: 1 - n for key, n in taken.owner.items()} if rescale else None
        self.job.restore(taken, owner)

    def undecided(self) -> list[dict[str, Any]]:
        requests = self.job.records("approvals")
        return [r for r in requests if r["call_id"] not in self.decided]

    # -- what must always hold -------------------------------------------------------------

    @invariant()
    def waiting_inputs_are_what_each_subtasks_queues_hold(self) -> None:
        for n, h in enumerate(self.subtasks):
            waiting = h.count("waiting_inputs")
            queued = {k: len(h.port.state_of(k).get("queue", {})) for k in h.port.keys_with_state()}
            assert 0 <= waiting <= sum(queued.values()), (n, waiting, queued)
            if h.restores == 0:
                assert waiting == sum(queued.values()), (n, waiting, queued)
                continue
            sent = {k for k, line in h.sent[self.attempt_sent[n] :] if '"approval"' not in line}
            touched = sum(q for key, q in queued.items() if key in sent)
            assert waiting >= touched, (n, waiting, queued)

    @invariant()
    def no_key_lives_on_both_subtasks(self) -> None:
        first, second = (h.port.keys_with_state() for h in self.subtasks)
        assert not first & second, f"{sorted(first & second)} have state on both subtasks"
        for n, h in enumerate(self.subtasks):
            strays = {key for key in h.port.keys_with_state() if self.job.owner[key] != n}
            assert not strays, f"subtask {n} holds state of keys it does not own: {strays}"

    @invariant()
    def nothing_answered_twice_across_the_job(self) -> None:
        for channel in ("outputs", "dead_letters"):
            ids = Counter(r["id"] for r in self.job.records(channel))
            assert max(ids.values(), default=0) <= 1, (channel, ids)

    @invariant()
    def event_ids_are_unique_across_the_job(self) -> None:
        events = self.job.records("events")
        ids = Counter(e["event_id"] for e in events)
        assert max(ids.values(), default=0) <= 1, [i for i, n in ids.items() if n > 1]
        for h in self.subtasks:
            last: dict[str, int] = {}
            for event in h.records("events"):
                run, sequence = event["run_id"], event["sequence"]
                assert sequence > last.get(run, 0), f"{run}: {sequence} after {last.get(run)}"
                last[run] = sequence

    @invariant()
    def no_tenant_call_starts_past_its_budget(self) -> None:
        """A model call (its request event directly before its response: not deferred)
        started only while the tenant's committed spend over the window before it was under
        the budget on both subtasks together and under half of it on the call's subtask
        (where the call's key is the tenant's only key, whichever subtask owns it)."""
        events = self.job.records("events")
        by_id = {e["event_id"]: e for e in events}
        responses = [e for e in events if e["event_type"] == "chat_response"]
        for response in responses:
            request = by_id.get(response["upstream_event_id"])
            if request is None or request["sequence"] != response["sequence"] - 1:
                continue  # a deferred call: it started when the window had room
            start, key = request["timestamp_ms"], response["key"]
            before = [r for r in responses if start - WINDOW_MS < r["timestamp_ms"] < start]
            spent = sum(tokens(r) for r in before if TENANT[r["key"]] == TENANT[key])
            assert spent < BUDGET_TOKENS, f"{TENANT[key]} spent {spent} before a call at {start}"
            here = sum(tokens(r) for r in before if r["key"] == key)
            assert here < BUDGET_TOKENS // 2, f"{key} spent {here} before a call at {start}"

    def teardown(self) -> None:
        if not hasattr(self, "job"):
            return
        for h in self.subtasks:
            h.runner.slots_held = False
        self.job.end_input()
        for _ in range(100):
            pending = [(h, call) for h in self.subtasks for call in h.runner.pending]
            timers = [t for h in self.subtasks for t in h.port.timers() if t.event_time]
            if not pending and not timers:
                break
            for h, call in pending:
                h.runner.complete(call)
            for h in self.subtasks:
                h.fire_due()
        for n, h in enumerate(self.subtasks):
            assert not h.runner.pending, f"subtask {n} left a call in flight after the end"
            assert h.count("waiting_inputs") == 0, f"subtask {n} counts inputs as waiting"
            h.close()
        inputs = [line for _, line in self.job.sent if '"approval"' not in line]
        answered = Counter(
            r["id"] for channel in ("outputs", "dead_letters") for r in self.job.records(channel)
        )
        for line in inputs:
            input_id = line.split('"id": "', 1)[1].split('"', 1)[0]
            assert answered[input_id] >= 1, f"{input_id} was never answered"


JobMachine.TestCase.settings = settings(
    max_examples=600,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_subtasks_keep_the_jobs_promises = JobMachine.TestCase
