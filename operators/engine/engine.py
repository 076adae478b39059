"""The agent engine: one run per key at a time, many keys at once, state in keyed state.

`AgentEngine` is what a keyed operator calls for each input line and each timer of a key;
it drives an `AgentRuntime` one step at a time and is the one place that knows its parts
and the order in which they act. The parts hold no references to one another: each gets
its own keyed state (`keyed_state.py`) and its own settings, and what one needs from
another flows through the engine as a method argument.

- `InputQueue`: inputs waiting behind their key's run, in arrival order;
- `RunDriver`: the calls in flight and the timers that look for their outcomes;
- `ParkedRuns`: runs waiting for approvals (parked, set aside) and settled approvals;
- `FollowupTimers`: follow-ups waiting for their due time;
- `KeyMemory`: the key's history and its expiry;
- `InputEnd`: the phase (running or draining) and the far-future timers that carry busy
  keys through the end of input;
- `SpendBudgets`: the key's and its tenant's spend windows, checked before each model
  call, and the runs they defer;
- `Emitter`: outputs, dead letters, approval requests and run events.

The events of a key and their handlers: an input line (`_on_input`), a decision line
(`_on_decision`), a timer (`on_timer`, which states the order: the end of input, due
follow-ups, runs set aside, then the key's run: its call done (`_on_call_timer`), its
parked deadline, deferral or restored action (`_on_run_timer`), or its waiting inputs and
memory when it has no run (`_on_idle_timer`)). The phase is read once per callback and
passed down.

All of it runs on the operator's task thread, through a `KeyedPort`, so the engine is
tested against `InMemoryKeyedPort` without a job. A run restored from a checkpoint without
a live call has its pending action performed again on its key's first timer (calls are
at-least-once, and a completed one is answered from the call journal when it is on; state
and outputs are exactly-once with a transactional sink).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from streamagents.connectors.providers.failover import FailoverModel
from streamagents.operators.agent import AgentRuntime, Outcome, RunState, Step
from streamagents.operators.agent.approval_steps import name_the_call
from streamagents.operators.agent.approvals import is_decision_line, read_decision_line
from streamagents.operators.agent.config import AgentConfig, tenant_of
from streamagents.operators.agent.emitted_records import DeadLetter
from streamagents.operators.agent.followups import Followup
from streamagents.operators.agent.parked_keys import run_of_call
from streamagents.operators.agent.records import ErrorInfo, parse_input
from streamagents.operators.agent.run_state import (
    Continue,
    Duplicate,
    Finish,
    ModelAction,
    Park,
    Unchanged,
)
from streamagents.operators.engine.emitter import Emitter
from streamagents.operators.engine.engine_loop import Timed
from streamagents.operators.engine.followup_timers import FollowupTimers
from streamagents.operators.engine.input_end import InputEnd, Phase
from streamagents.operators.engine.input_queue import InputQueue
from streamagents.operators.engine.key_memory import KeyMemory
from streamagents.operators.engine.keyed_port import KeyedPort
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.metrics import EngineMetrics, UsageTotals
from streamagents.operators.engine.parked_runs import ParkedRuns
from streamagents.operators.engine.run_driver import SLOT_WAIT_S, Call, CallRunner, RunDriver
from streamagents.operators.engine.run_usage import output_usage, spent, usage_of
from streamagents.operators.engine.spend_budgets import Deferral, Refusal, SpendBudgets
from streamagents.serde.messages import ChatMessage

__all__ = ["DRAIN_WAIT_S", "AgentEngine"]

DRAIN_WAIT_S = 0.05
"""How long an end-of-input timer waits for a call before looking again on the next one."""


class AgentEngine:
    """Applies input lines and timers of the port's current key to its runs."""

    def __init__(
        self,
        port: KeyedPort,
        config: AgentConfig,
        runtime: AgentRuntime,
        runner: CallRunner,
        metrics: EngineMetrics,
        emitter: Emitter,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        state = declare(port)
        self._port = port
        self._config = config
        self._runtime = runtime
        self._metrics = metrics
        self._emit = emitter
        self._run = state.run
        self._input_end = InputEnd(port)
        self._queue = InputQueue(state.queue, port, config.max_waiting_inputs, metrics)
        self._memory = KeyMemory(state.memory, port, config.memory.ttl_seconds, metrics)
        self._parked = ParkedRuns(
            state.parked, port, config.while_parked, config.max_inputs_per_parked_key
        )
        self._followups = FollowupTimers(
            state.followups, port, config.followups.enabled, config.key_field
        )
        self._driver = RunDriver(port, runner, config.budgets.run_timeout_s, metrics, clock_s)
        self._spend = SpendBudgets(state.spend, config.budgets, config.key_field, config.subtasks)
        self._closed = False

    # -- the events of a key ---------------------------------------------------------------

    def process_input(self, raw: str) -> Iterator[Any]:
        """An input line of the current key: a decision line is applied at once, any other
        input waits behind the key's run or starts its own (`_on_input`)."""
        phase = self._input_end.phase
        if is_decision_line(raw):
            yield from self._on_decision(raw, phase)
        else:
            yield from self._on_input(raw, phase)

    def on_timer(self, timestamp: int, event_time: bool) -> Iterator[Any]:
        """A timer of the current key; event time means the input has ended. The parts act
        in this order: the end of input, the key's follow-ups (due ones start; at the end of
        input each is a dead letter), its runs set aside (deadlines; the end of input), then
        its run: the outcome of its call, the timer of a run without a live call, or, with
        no run, its waiting inputs and its memory's expiry.

        A processing-time timer for a key without a live call is the memory cleanup timer
        (when the key has no run) or, after a restore, the cue to perform the run's action
        again. The cleanup timer of a busy key does nothing; the run's end sets it again.
        """
        if self._closed:
            return
        if event_time:
            self._input_end.ended_at(timestamp)
        phase = self._input_end.phase
        key = self._port.current_key()
        now = self._port.now_ms()
        if event_time:
            for letter in self._followups.drop(self._followups.waiting()):
                yield self._emit.dead_letter(letter)
        elif self._followups.enabled:
            yield from self._fire_followups(key, now, phase)
        call = self._driver.of(key)
        polled = call is not None and self._driver.looks_at(call, timestamp, event_time)
        if (self._parked.separate or not polled) and self._parked.has_aside():
            yield from self._wake_aside(now, phase)  # (`queue`: set aside before a restore)
        call = self._driver.of(key)
        if call is not None:
            yield from self._on_call_timer(call, key, timestamp, event_time, now, phase)
            return
        stored = self._run.value()
        if stored is not None:
            yield from self._on_run_timer(stored, now, phase)
        else:
            yield from self._on_idle_timer(timestamp, event_time, now, phase)

    def close(self) -> None:
        """Forget the live calls; timers that still fire do nothing."""
        self._closed = True
        self._driver.clear()

    # -- an input line ---------------------------------------------------------------------

    def _on_input(self, raw: str, phase: Phase) -> Iterator[Any]:
        """Queue an input line behind its key's run, or start its run (waiting for a slot).

        The task thread waits at most `SLOT_WAIT_S` for a free slot before a run starts; past
        that the input waits in its key's queue and the key's timer starts it once a slot
        frees. It blocks for longer only when `max_waiting_inputs` inputs already wait in
        this subtask: for a free slot, or for the busy key's current call, whose outcome it
        then applies here. Either way a checkpoint barrier
        (unaligned, overtaking the records buffered behind this one) is handled as soon as
        this input is placed, so checkpoints complete while a backlog waits.
        """
        key = self._port.current_key()
        yield from self._make_room(key, phase)
        stored = None if self._driver.busy(key) else self._run.value()
        if stored is not None or self._parked.separate:  # the key may have a parked run
            letter = self._parked.refusal_letter(raw, stored, self._queue.length())
            if letter is not None:
                yield self._emit.dead_letter(letter)
                return
        if self._driver.busy(key) or stored is not None:
            self._queue.push(raw)
            return
        now = self._port.now_ms()
        limit = None if self._queue.full else SLOT_WAIT_S
        if self._queue.has_lines() or not self._driver.wait_for_slot(now, limit):
            self._queue.push(raw)  # behind the key's inputs that already wait for a slot
            self._driver.defer_start(now)
            self._input_end.hold()
            return
        yield from self._begin(raw, phase)

    def _make_room(self, key: str, phase: Phase) -> Iterator[Any]:
        """While the subtask's waiting inputs are at their bound, settle the key's calls."""
        while self._queue.full and (call := self._driver.of(key)) is not None:
            now = self._port.now_ms()
            self._driver.wait(call, max(0, self._driver.deadline(call) - now) / 1000)
            yield from self._settle(call, key, self._port.now_ms(), phase)

    # -- timers of the key's run -----------------------------------------------------------

    def _on_call_timer(
        self, call: Call, key: str, timestamp: int, event_time: bool, now_ms: int, phase: Phase
    ) -> Iterator[Any]:
        """A timer of a key with a live call: when it is the call's look, apply the call's
        outcome (at the end of input: after waiting `DRAIN_WAIT_S` for it)."""
        if (call.drain_at if event_time else call.poll_at) not in (timestamp, None):
            return
        if event_time and not call.future.done():
            self._driver.wait(call, DRAIN_WAIT_S)
            now_ms = self._port.now_ms()
        yield from self._settle(call, key, now_ms, phase)

    def _on_run_timer(self, stored: str, now_ms: int, phase: Phase) -> Iterator[Any]:
        """A timer for a key with a run but no live call: a parked run's deadline (or the
        end of input), a deferred run's wait, or, after a restore, the cue to perform its
        action again."""
        state = RunState.model_validate_json(stored)
        if state.parked:
            yield from self._wake_parked(state, now_ms, phase)
            return
        deferral = self._spend.deferral() if self._spend.enabled else None
        if deferral is not None:
            yield from self._wake_deferred(state, deferral, now_ms, phase)
            return
        history = self._memory.load(now_ms)
        self._emit.resume_trace(state)
        self._queue.count_restored()
        if self._driver.timed_out(state, now_ms):
            step = self._runtime.timeout(state, now_ms)
            yield from self._continue(step, usage_of(state), history, now_ms, phase)
            return
        self._metrics.calls_reissued.inc()
        if not (yield from self._perform(state, history, now_ms, phase)):
            yield from self._after_run(phase)

    def _on_idle_timer(
        self, timestamp: int, event_time: bool, now_ms: int, phase: Phase
    ) -> Iterator[Any]:
        """A timer of a key without a run: start its first input that waited for a slot,
        once one is free (at the end of input: wait for it), else look again later; with
        no input waiting, its memory's cleanup."""
        if not self._queue.has_lines():
            if not event_time and self._memory.clean_up(timestamp):
                self._queue.forget_numbering()
            return
        if self._driver.wait_for_slot(now_ms, None if event_time else 0.0):
            self._driver.deferred_started()
            yield from self._begin(self._queue.pop(), phase)
        elif event_time:
            self._input_end.next_look()  # processing-time timers no longer fire
        else:
            self._driver.look_for_slot(now_ms)

    def _fire_followups(self, key: str, now_ms: int, phase: Phase) -> Iterator[Any]:
        """Start the runs of the key's follow-ups now due, in due order: queued behind the
        key's run like any input when it has one."""
        for line in self._followups.take_due(now_ms):
            if self._busy(key):
                self._queue.push(line)
            else:
                yield from self._begin(line, phase)

    def _wake_deferred(
        self, state: RunState, deferral: Deferral, now_ms: int, phase: Phase
    ) -> Iterator[Any]:
        """A timer for a key whose run waits for a spend window: at its time (or when the
        input has ended) the run's model call is checked again; the time it waited does not
        count against `run_timeout_s`, as time parked for an approval does not."""
        if now_ms < deferral.until_ms and phase is Phase.RUNNING:
            return  # another of the key's timers
        self._spend.end_deferral()
        waited = max(0, now_ms - deferral.since_ms)
        state = state.model_copy(update={"parked_ms": state.parked_ms + waited})
        history = self._memory.load(now_ms)
        if not (yield from self._perform(state, history, now_ms, phase)):
            yield from self._after_run(phase)

    # -- a run's life ----------------------------------------------------------------------

    def _busy(self, key: str) -> bool:
        """Whether the key has a run in progress (a live call, or a run in its `run` state)."""
        return self._driver.busy(key) or self._run.value() is not None

    def _begin(self, raw: str | None, phase: Phase) -> Iterator[Any]:
        """Start runs from `raw` and then the key's queue until one is pending or none is left."""
        while raw is not None:
            now = self._port.now_ms()
            record = None
            try:
                parsed = parse_input(raw, self._config.key_field, self._config.input_limits)
                record = self._queue.number(parsed)
                history = self._memory.load(now)
                step = self._runtime.start(
                    record, history, now, self._followups.waiting(), self._queue.next_run()
                )
            except Exception as error:
                self._metrics.runs_failed.inc()
                letter = DeadLetter.build(
                    "run",
                    ErrorInfo.from_exception(error),
                    raw,
                    key=self._port.current_key(),
                    record_id=record.id if record is not None else None,
                )
                yield self._emit.dead_letter(letter)
                if record is not None:  # numbered: the numbering expires with the memory
                    self._memory.arm_cleanup(now, wrote_history=False)
                raw = self._queue.pop()
                continue
            self._metrics.runs_started.inc()
            if isinstance(step, Continue) and phase is Phase.RUNNING:
                self._input_end.hold()
            if (yield from self._apply_step(step, UsageTotals(), history, now, phase)):
                return
            raw = self._queue.pop()
        self._run.clear()
        if (
            phase is Phase.RUNNING
            and not self._followups.waiting()
            and not self._parked.has_aside()
        ):
            self._input_end.release()  # idle: its end-of-input timer would stay in state

    def _apply_step(
        self,
        step: Step,
        before: UsageTotals,
        history: list[ChatMessage],
        now_ms: int,
        phase: Phase,
    ) -> Iterator[Any]:
        """Emit a step's records and keep or end its run; returns whether the run goes on.

        The run ended (`Finish`), or it goes on: to perform its action (`Continue`), to
        wait for decisions (`Park`), or as it was (`Stale`, an `Unchanged` expiry)."""
        if self._spend.enabled:
            self._charge(step, before, now_ms)
        yield from self._emit.events(step.events, run_ended=isinstance(step, Finish))
        if isinstance(step, Finish | Unchanged) and step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)
        if isinstance(step, Continue | Park):
            for request in step.approval_requests:
                yield self._emit.approval_request(request)
        self._followups.cancel(step.cancelled)
        self._parked.remember(step.settled, now_ms)
        if isinstance(step, Finish):
            yield from self._ended(step, phase, before)
            if step.history is not None:
                self._memory.store(now_ms, step.history)
            self._run.clear()
            self._memory.arm_cleanup(now_ms, wrote_history=step.history is not None)
            return False
        state = step.state
        assert state is not None, f"a {step.kind} step without a run"
        if state.parked:
            if phase is Phase.DRAINING:  # the input has ended: no decision can come any more
                ended = self._runtime.abandon_parked(state, now_ms)
                return (yield from self._apply_step(ended, before, history, now_ms, phase))
            self._metrics.usage(before, usage_of(state))
            if self._parked.goes_aside(state):
                self._parked.set_aside(state)
                self._run.clear()
                return False
            self._run.update(state.model_dump_json())
            self._parked.park(state)
            return True
        self._metrics.usage(before, usage_of(state))
        return (yield from self._perform(state, history, now_ms, phase))

    def _charge(self, step: Step, before: UsageTotals, now_ms: int) -> None:
        """Charge what the run spent in this step to its key's and tenant's windows."""
        if isinstance(step, Finish):
            output = step.output
            after, key, attributes = output_usage(output), output.key, output.attributes
        elif step.state is not None:
            after, key, attributes = usage_of(step.state), step.state.key, step.state.attributes
        else:
            return
        tenant = tenant_of(self._config.budgets, self._config.key_field, key, attributes)
        self._spend.charge(tenant, spent(before, after), now_ms)

    def _perform(
        self, state: RunState, history: list[ChatMessage], now_ms: int, phase: Phase
    ) -> Iterator[Any]:
        """Keep the run and hand its pending action to the runner, unless a spend budget
        stops its model call: then the run ends or waits (see `spend_budgets.py`). Returns
        whether the run goes on."""
        refusal = None
        if self._spend.enabled and isinstance(state.pending, ModelAction):
            refusal = self._spend.refusal(state, now_ms)
        if refusal is None:
            self._run.update(state.model_dump_json())
            call = self._driver.issue(state, history, self._runtime.perform(state, history))
            self._look_for(call, now_ms, phase)
            return True
        if isinstance(refusal, Refusal) and (
            refusal.on_exceeded == "defer" and phase is Phase.RUNNING
        ):
            step = self._runtime.defer(
                state,
                refusal.budget,
                refusal.limit,
                refusal.window_s,
                refusal.room_at_ms,
                now_ms,
            )
            yield from self._emit.events(step.events, run_ended=False)
            self._run.update(step.state.model_dump_json())
            self._spend.defer(now_ms, refusal.room_at_ms)
            self._port.register_processing_timer(refusal.room_at_ms)
            self._metrics.runs_deferred.inc()
            return True
        error = refusal.error if isinstance(refusal, Refusal) else refusal
        ended = self._runtime.refuse(state, error, now_ms)
        return (yield from self._apply_step(ended, usage_of(state), history, now_ms, phase))

    def _look_for(self, call: Call, now_ms: int, phase: Phase) -> None:
        """Set the timer that looks for the call's outcome next: a processing-time one from
        the poll schedule, or while draining the next event-time look."""
        if phase is Phase.DRAINING:
            call.drain_at = self._input_end.next_look()
        else:
            self._driver.arm(call, now_ms)

    def _ended(
        self, step: Finish, phase: Phase, before: UsageTotals | None = None
    ) -> Iterator[Any]:
        """A finished run's output, its count as finished or failed, its follow-ups kept;
        with `before`, the calls and tokens it used since then are counted too."""
        if before is not None:
            self._metrics.usage(before, output_usage(step.output))
        failed = step.dead_letter is not None or step.output.status != "ok"
        yield self._emit.output(step.output)
        (self._metrics.runs_failed if failed else self._metrics.runs_finished).inc()
        yield from self._keep_followups(step.followups, phase)

    def _keep_followups(self, followups: list[Followup], phase: Phase) -> Iterator[Any]:
        """Keep the follow-ups a run scheduled, holding the key's end-of-input timer for
        them; once the input has ended, their dead letters."""
        if not followups:
            return
        for letter in self._followups.keep(followups, phase):
            yield self._emit.dead_letter(letter)
        if phase is Phase.RUNNING:
            self._input_end.hold()

    def _continue(
        self,
        step: Step,
        before: UsageTotals,
        history: list[ChatMessage],
        now_ms: int,
        phase: Phase,
    ) -> Iterator[Any]:
        """Apply a step of a running run; when it ended, start the key's next input."""
        if not (yield from self._apply_step(step, before, history, now_ms, phase)):
            yield from self._after_run(phase)

    def _after_run(self, phase: Phase) -> Iterator[Any]:
        """The key's run ended or was set aside: a ready set-aside run goes on first, else
        the key's next queued input starts."""
        if (yield from self._resume_ready(phase)):
            return
        yield from self._begin(self._queue.pop(), phase)

    def _settle(self, call: Call, key: str, now_ms: int, phase: Phase) -> Iterator[Any]:
        """Advance the run with its call's outcome, time it out past its deadline, or look
        again later."""
        if call.future.done():
            self._driver.take(key)
            yield from self._harvest(call, now_ms, phase)
        elif now_ms >= self._driver.deadline(call):
            self._driver.give_up(key, call)
            step = self._runtime.timeout(call.state, now_ms)
            yield from self._continue(step, usage_of(call.state), call.history, now_ms, phase)
        else:
            self._look_for(call, now_ms, phase)

    def _harvest(self, call: Call, now_ms: int, phase: Phase) -> Iterator[Any]:
        """Advance the run with its finished call's outcome."""
        try:
            timed = call.future.result()
            self._observe(call, timed)
            step = self._runtime.advance(call.state, timed.value, now_ms, call.history)
        except Exception as error:
            yield from self._abandon(call, error, phase)
            return
        yield from self._continue(step, usage_of(call.state), call.history, now_ms, phase)

    def _observe(self, call: Call, timed: Timed[Outcome]) -> None:
        """Fold a finished call into the poll schedule, the call journal's answers and
        failed records into the metrics, and a model call too: its latency, the model that
        answered, the failover chain's breakers."""
        self._driver.observe(call, timed)
        outcome = timed.value
        if outcome.from_journal:
            self._metrics.calls_from_journal.inc(len(outcome.from_journal))
        if outcome.unrecorded:
            self._metrics.call_journal_write_failures.inc(outcome.unrecorded)
        if outcome.kind != "model":
            return
        self._metrics.model_latency(outcome.latency_ms)
        if outcome.response is not None:
            self._metrics.model_answered(outcome.response, self._config.model.name)
        model = self._runtime.model
        if isinstance(model, FailoverModel):
            self._metrics.breakers(model.breakers)

    def _abandon(self, call: Call, error: BaseException, phase: Phase) -> Iterator[Any]:
        """End a run whose call or step failed unexpectedly: dead letter, then the next input.

        The dead letter carries the input as received, read back from the media store when
        the run kept it there.
        """
        self._metrics.runs_failed.inc()
        yield self._emit.dead_letter(
            self._runtime.context.dead_letter(call.state, ErrorInfo.from_exception(error))
        )
        self._emit.end_trace(call.state.run_id)
        self._run.clear()
        self._memory.arm_cleanup(self._port.now_ms(), wrote_history=False)
        yield from self._keep_followups(call.state.followups, phase)
        yield from self._after_run(phase)

    # -- runs waiting for approvals --------------------------------------------------------

    def _on_decision(self, raw: str, phase: Phase) -> Iterator[Any]:
        """Apply a decision to the run it names: the key's parked run, a run set aside
        (`while_parked: separate_run`), or a run whose other call is still out. It never
        waits in the queue."""
        now = self._port.now_ms()
        key = self._port.current_key()
        decision = read_decision_line(raw)
        if decision.call_id is None:
            named = name_the_call(self._runtime.tools, decision, self._runs_of_key(key), key)
            if isinstance(named, Unchanged):
                yield from self._unchanged(named)
                return
            decision = named
        assert decision.call_id is not None
        aside = self._parked.aside(run_of_call(decision.call_id))
        call = None if aside is not None else self._driver.of(key)
        stored = aside if aside is not None else self._run.value()
        state = call.state if call is not None else None
        if state is None and stored is not None:
            state = RunState.model_validate_json(stored)
        settled = self._parked.settled(decision.call_id)
        step = self._runtime.decide(state, decision, now, settled, key)
        if aside is not None:
            assert state is not None
            yield from self._step_aside(step, state, now, phase)
            return
        if isinstance(step, Duplicate | Unchanged):
            yield from self._unchanged(step)
            return
        if call is not None and not isinstance(step, Finish):
            # its other call is running: its outcome is applied to the decided state
            yield from self._emit.events(step.events)
            self._parked.remember(step.settled, now)
            call.state = step.state
            self._run.update(step.state.model_dump_json())
            return
        assert state is not None
        history = self._memory.load(now)
        yield from self._continue(step, usage_of(state), history, now, phase)

    def _runs_of_key(self, key: str) -> list[RunState]:
        """The key's runs that may wait for decisions: its current run and those set aside."""
        call = self._driver.of(key)
        stored = self._run.value()
        current = call.state if call is not None else None
        if current is None and stored is not None:
            current = RunState.model_validate_json(stored)
        aside = [state for _, state in self._parked.aside_runs()]
        return ([current] if current is not None else []) + aside

    def _unchanged(self, step: Duplicate | Unchanged) -> Iterator[Any]:
        """A decision that changed no run (a duplicate, or refused): its dead letter, if any."""
        yield from self._emit.events(step.events, traced=False)
        if isinstance(step, Unchanged) and step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)

    def _wake_parked(self, state: RunState, now_ms: int, phase: Phase) -> Iterator[Any]:
        """On a timer of a parked run: at the end of input end it (`ApprovalPending` dead
        letter), past a deadline reject what timed out and go on, else set its deadline
        timer again."""
        due = state.next_deadline_ms
        if phase is Phase.RUNNING and (due is None or due > now_ms):
            self._parked.park(state)  # another timer of the key (cleanup, a restored poll)
            return
        history = self._memory.load(now_ms)
        if phase is Phase.DRAINING:
            step = self._runtime.abandon_parked(state, now_ms)
        else:
            step = self._runtime.expire(state, now_ms)
        yield from self._continue(step, usage_of(state), history, now_ms, phase)

    def _wake_aside(self, now_ms: int, phase: Phase) -> Iterator[Any]:
        """On a timer of a key with runs set aside: at the end of input end each parked one
        (`ApprovalPending` dead letter), else reject what timed out (`_step_aside`)."""
        for run_id, state in self._parked.aside_runs():
            if phase is Phase.DRAINING:
                if state.parked:
                    self._parked.take_aside(run_id)
                    step = self._runtime.abandon_parked(state, now_ms)
                    yield from self._end_aside(step, now_ms, phase)
                continue
            due = state.next_deadline_ms
            if due is not None and due <= now_ms:
                step = self._runtime.expire(state, now_ms)
                yield from self._step_aside(step, state, now_ms, phase)

    def _step_aside(self, step: Step, state: RunState, now_ms: int, phase: Phase) -> Iterator[Any]:
        """Apply a decision or an expiry to a run set aside: it stays aside while parked, or
        while its key runs another (ready: `_resume_ready` takes it on), else goes on now."""
        if isinstance(step, Duplicate | Unchanged):
            yield from self._unchanged(step)
            return
        busy = self._busy(self._port.current_key())
        if isinstance(step, Continue | Park) and (isinstance(step, Park) or busy):
            yield from self._emit.events(step.events)
            self._parked.remember(step.settled, now_ms)
            self._parked.set_aside(step.state)
            return
        self._parked.take_aside(state.run_id)
        if isinstance(step, Finish) and busy:
            yield from self._end_aside(step, now_ms, phase)
            return
        history = self._memory.load(now_ms)
        yield from self._continue(step, usage_of(state), history, now_ms, phase)

    def _end_aside(self, step: Finish, now_ms: int, phase: Phase) -> Iterator[Any]:
        """Emit the records of a set-aside run that ended without going on (rejected to an
        error, or abandoned at the end of input), leaving the key's `run` state alone; such
        an ending never changes the key's memory."""
        yield from self._emit.events(step.events, run_ended=True)
        self._parked.remember(step.settled, now_ms)
        if step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)
        yield from self._ended(step, phase)

    def _resume_ready(self, phase: Phase) -> Iterator[Any]:
        """Go on with the key's first ready set-aside run, with the key's memory as it is
        now; returns whether one went on."""
        state = self._parked.ready()
        if state is None:
            return False
        self._parked.take_aside(state.run_id)
        now = self._port.now_ms()
        history = self._memory.load(now)
        step = Continue(state=state)
        return (yield from self._apply_step(step, usage_of(state), history, now, phase))
