"""The agent engine: one run per key at a time, many keys at once, state in keyed state.

`AgentEngine` is what a keyed operator calls for each input line and each timer of a key;
it drives an `AgentRuntime` one step at a time and is the one place that knows the order
in which its parts act:

- `InputQueue`: inputs waiting behind their key's run, in arrival order;
- `RunDriver`: the calls in flight and the timers that look for their outcomes;
- `ParkedRuns`: runs waiting for approvals (parked, set aside) and settled approvals;
- `FollowupTimers`: follow-ups waiting for their due time;
- `KeyMemory`: the key's history and its expiry;
- `InputEnd`: the far-future timers that carry busy keys through the end of input;
- `Emitter`: outputs, dead letters, approval requests and run events.

All of it runs on the operator's task thread, through a `KeyedPort`, so the engine is
tested against `InMemoryKeyedPort` without a job. A run restored from a checkpoint without
a live call has its pending action performed again on its key's first timer (calls are
at-least-once; state and outputs are exactly-once with a transactional sink).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from streamagents.operators.agent.approvals import is_decision_line, read_decision_line
from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.agent.parked_keys import run_of_call
from streamagents.operators.agent.records import ErrorInfo, dead_letter_record, parse_input
from streamagents.operators.agent.runtime import AgentRuntime, RunState, Step
from streamagents.operators.engine.emitter import Emitter
from streamagents.operators.engine.followup_timers import FollowupTimers
from streamagents.operators.engine.input_end import InputEnd
from streamagents.operators.engine.input_queue import InputQueue
from streamagents.operators.engine.key_memory import KeyMemory
from streamagents.operators.engine.keyed_port import KeyedPort, StateKind
from streamagents.operators.engine.metrics import EngineMetrics, UsageTotals
from streamagents.operators.engine.parked_runs import ParkedRuns
from streamagents.operators.engine.run_driver import Call, CallRunner, RunDriver
from streamagents.serde.messages import ChatMessage

__all__ = ["AgentEngine"]

DRAIN_WAIT_S = 0.05
"""How long an end-of-input timer waits for a call before looking again on the next one."""


def _totals(state: RunState) -> UsageTotals:
    return UsageTotals(
        state.model_calls,
        state.tool_calls,
        state.input_tokens,
        state.output_tokens,
        state.cached_tokens,
    )


def _output_totals(output: dict[str, Any]) -> UsageTotals:
    usage = output.get("usage") or {}
    return UsageTotals(
        output.get("model_calls", 0),
        output.get("tool_calls", 0),
        usage.get("input_tokens", 0),
        usage.get("output_tokens", 0),
        usage.get("cached_tokens", 0),
    )


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
    ) -> None:
        self._port = port
        self._config = config
        self._runtime = runtime
        self._metrics = metrics
        self._emit = emitter
        self._run = port.value_state("run", StateKind.TEXT)
        self._input_end = InputEnd(port)
        self._queue = InputQueue(port, config.max_waiting_inputs, metrics)
        self._memory = KeyMemory(port, config.memory.ttl_seconds, runtime.history_expired, metrics)
        self._parked = ParkedRuns(port, config)
        self._followups = FollowupTimers(port, config, self._input_end)
        self._driver = RunDriver(
            port, runner, runtime, config.budgets.run_timeout_s, self._input_end, metrics
        )
        self._closed = False

    def close(self) -> None:
        """Forget the live calls; timers that still fire do nothing."""
        self._closed = True
        self._driver.clear()

    # -- input -----------------------------------------------------------------------------

    def process_input(self, raw: str) -> Iterator[Any]:
        """Queue an input line behind its key's run, or start its run (waiting for a slot);
        a decision line is applied at once, never queued.

        The task thread blocks only for one call: for a free slot before a run starts, or,
        when `max_waiting_inputs` inputs already wait in this subtask, for the busy key's
        current call, whose outcome it then applies here. Either way a checkpoint barrier
        (unaligned, overtaking the records buffered behind this one) is handled as soon as
        this input is placed, so checkpoints complete while a backlog waits.
        """
        if is_decision_line(raw):
            yield from self._decide(raw)
            return
        key = self._port.current_key()
        yield from self._make_room(key)
        stored = None if self._driver.busy(key) else self._run.value()
        if stored is not None or self._parked.separate:  # the key may have a parked run
            letter = self._parked.refusal_letter(raw, stored, self._queue)
            if letter is not None:
                yield self._emit.dead_letter(letter)
                return
        if self._driver.busy(key) or stored is not None:
            self._queue.push(raw)
            return
        self._driver.wait_for_slot(self._port.now_ms())
        yield from self._begin(raw)

    def _make_room(self, key: str) -> Iterator[Any]:
        """While the subtask's waiting inputs are at their bound, settle the key's calls."""
        while self._queue.full and (call := self._driver.of(key)) is not None:
            now = self._port.now_ms()
            self._driver.wait(call, max(0, self._driver.deadline(call) - now) / 1000)
            yield from self._settle(call, key, self._port.now_ms())

    def _busy(self, key: str) -> bool:
        """Whether the key has a run in progress (a live call, or a run in its `run` state)."""
        return self._driver.busy(key) or self._run.value() is not None

    # -- runs ------------------------------------------------------------------------------

    def _begin(self, raw: str | None) -> Iterator[Any]:
        """Start runs from `raw` and then the key's queue until one is pending or none is left."""
        while raw is not None:
            now = self._port.now_ms()
            record = None
            try:
                parsed = parse_input(raw, self._config.key_field, self._config.input_limits)
                record = self._queue.number(parsed)
                history = self._memory.load(now)
                step = self._runtime.start(record, history, now, self._followups.waiting())
            except Exception as error:
                self._metrics.runs_failed.inc()
                letter = dead_letter_record(
                    "run",
                    ErrorInfo.from_exception(error),
                    raw,
                    key=self._port.current_key(),
                    record_id=record.id if record is not None else None,
                )
                yield self._emit.dead_letter(letter)
                raw = self._queue.pop()
                continue
            self._metrics.runs_started.inc()
            if step.state is not None and not self._input_end.draining:
                self._input_end.hold()
            if (yield from self._apply_step(step, UsageTotals(), history, now)):
                return
            raw = self._queue.pop()
        self._run.clear()
        if (
            not self._input_end.draining
            and not self._followups.waiting()
            and not self._parked.has_aside()
        ):
            self._input_end.release()  # idle: its end-of-input timer would stay in state

    def _apply_step(
        self, step: Step, before: UsageTotals, history: list[ChatMessage], now_ms: int
    ) -> Iterator[Any]:
        """Emit a step's records and keep or end its run; returns whether the run goes on."""
        yield from self._emit.events(step.events, run_ended=step.state is None)
        if step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)
        for request in step.approval_requests:
            yield self._emit.approval_request(request)
        self._followups.cancel(step.cancelled)
        self._parked.remember(step.settled, now_ms)
        state = step.state
        if state is not None and state.parked:
            if self._input_end.draining:  # the input has ended: no decision can come any more
                ended = self._runtime.abandon_parked(state, now_ms)
                return (yield from self._apply_step(ended, before, history, now_ms))
            self._metrics.usage(before, _totals(state))
            if self._parked.goes_aside(state):
                self._parked.set_aside(state)
                self._run.clear()
                return False
            self._run.update(state.model_dump_json())
            self._parked.park(state)
            return True
        if state is not None:
            self._metrics.usage(before, _totals(state))
            self._run.update(state.model_dump_json())
            self._driver.issue(state, history, now_ms)
            return True
        yield from self._ended(step, before)
        if step.history is not None:
            self._memory.store(now_ms, step.history)
        self._run.clear()
        self._memory.arm_cleanup(now_ms if step.history is not None else None)
        return False

    def _ended(self, step: Step, before: UsageTotals | None = None) -> Iterator[Any]:
        """A finished run's output, its count as finished or failed, its follow-ups kept;
        with `before`, the calls and tokens it used since then are counted too."""
        failed = step.dead_letter is not None
        if step.output is not None:
            output = json.loads(step.output)
            if before is not None:
                self._metrics.usage(before, _output_totals(output))
            failed = failed or output.get("status") != "ok"
            yield step.output
        (self._metrics.runs_failed if failed else self._metrics.runs_finished).inc()
        for letter in self._followups.keep(step.followups):
            yield self._emit.dead_letter(letter)

    def _continue(
        self, step: Step, before: UsageTotals, history: list[ChatMessage], now_ms: int
    ) -> Iterator[Any]:
        """Apply a step of a running run; when it ended, start the key's next input."""
        if not (yield from self._apply_step(step, before, history, now_ms)):
            yield from self._after_run()

    def _after_run(self) -> Iterator[Any]:
        """The key's run ended or was set aside: a ready set-aside run goes on first, else
        the key's next queued input starts."""
        if (yield from self._resume_ready()):
            return
        yield from self._begin(self._queue.pop())

    # -- timers ----------------------------------------------------------------------------

    def on_timer(self, timestamp: int, event_time: bool) -> Iterator[Any]:
        """Look for the key's call outcome and advance the run when it is there; fire due
        follow-ups, expire approvals, clean up memory; an event-time timer means the input
        has ended.

        A processing-time timer for a key without a live call is the memory cleanup timer
        (when the key has no run) or, after a restore, the cue to perform the run's action
        again. The cleanup timer of a busy key does nothing; the run's end sets it again.
        """
        if self._closed:
            return
        key = self._port.current_key()
        draining = event_time
        if draining:
            self._input_end.ended_at(timestamp)
        now = self._port.now_ms()
        if draining:
            for letter in self._followups.drop(self._followups.waiting()):
                yield self._emit.dead_letter(letter)
        elif self._followups.enabled:
            yield from self._fire_followups(key, now)
        call = self._driver.of(key)
        polled = call is not None and self._driver.looks_at(call, timestamp, draining)
        if (self._parked.separate or not polled) and self._parked.has_aside():
            yield from self._wake_aside(now)  # (`queue`: set aside before a restore)
        call = self._driver.of(key)
        if call is None:
            stored = self._run.value()
            if stored is None:
                if not draining:
                    self._memory.clean_up(timestamp, self._queue)
                return
            yield from self._resume(stored, now)
            return
        if (call.drain_at if draining else call.poll_at) not in (timestamp, None):
            return
        if draining and not call.future.done():
            self._driver.wait(call, DRAIN_WAIT_S)
            now = self._port.now_ms()
        yield from self._settle(call, key, now)

    def _fire_followups(self, key: str, now_ms: int) -> Iterator[Any]:
        """Start the runs of the key's follow-ups now due, in due order: queued behind the
        key's run like any input when it has one."""
        for line in self._followups.take_due(now_ms):
            if self._busy(key):
                self._queue.push(line)
            else:
                yield from self._begin(line)

    def _settle(self, call: Call, key: str, now_ms: int) -> Iterator[Any]:
        """Advance the run with its call's outcome, time it out past its deadline, or look
        again later."""
        if call.future.done():
            self._driver.take(key)
            yield from self._harvest(call, now_ms)
        elif now_ms >= self._driver.deadline(call):
            self._driver.give_up(key, call)
            step = self._runtime.timeout(call.state, now_ms)
            yield from self._continue(step, _totals(call.state), call.history, now_ms)
        else:
            self._driver.arm(call, now_ms)

    def _harvest(self, call: Call, now_ms: int) -> Iterator[Any]:
        """Advance the run with its finished call's outcome."""
        try:
            timed = call.future.result()
            self._driver.observe(call, timed)
            step = self._runtime.advance(call.state, timed.value, now_ms, call.history)
        except Exception as error:
            yield from self._abandon(call, error)
            return
        yield from self._continue(step, _totals(call.state), call.history, now_ms)

    def _abandon(self, call: Call, error: BaseException) -> Iterator[Any]:
        """End a run whose call or step failed unexpectedly: dead letter, then the next input.

        The dead letter carries the input as received, read back from the media store when
        the run kept it there.
        """
        self._metrics.runs_failed.inc()
        yield self._emit.dead_letter(
            self._runtime.dead_letter(call.state, ErrorInfo.from_exception(error))
        )
        self._emit.end_trace(call.state.run_id)
        self._run.clear()
        self._memory.arm_cleanup(None)
        for letter in self._followups.keep(call.state.followups):
            yield self._emit.dead_letter(letter)
        yield from self._after_run()

    def _resume(self, stored: str, now_ms: int) -> Iterator[Any]:
        """A timer for a key with a run but no live call: a parked run's deadline (or the
        end of input), or, after a restore, the cue to perform its action again."""
        state = RunState.model_validate_json(stored)
        if state.parked:
            yield from self._wake_parked(state, now_ms)
            return
        history = self._memory.load(now_ms)
        self._emit.resume_trace(state)
        self._queue.count_restored()
        if self._driver.timed_out(state, now_ms):
            step = self._runtime.timeout(state, now_ms)
            yield from self._continue(step, _totals(state), history, now_ms)
            return
        self._metrics.calls_reissued.inc()
        self._driver.issue(state, history, now_ms)

    # -- approvals -------------------------------------------------------------------------

    def _decide(self, raw: str) -> Iterator[Any]:
        """Apply a decision to the key's run: parked or not, it never waits in the queue."""
        now = self._port.now_ms()
        key = self._port.current_key()
        decision = read_decision_line(raw)
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
            yield from self._step_aside(step, state, now)
            return
        if step.duplicate or step.state is state:
            yield from self._unchanged(step)
            return
        if call is not None and step.state is not None:
            # its other call is running: its outcome is applied to the decided state
            yield from self._emit.events(step.events)
            self._parked.remember(step.settled, now)
            call.state = step.state
            self._run.update(step.state.model_dump_json())
            return
        assert state is not None
        history = self._memory.load(now)
        yield from self._continue(step, _totals(state), history, now)

    def _unchanged(self, step: Step) -> Iterator[Any]:
        """A decision that changed no run (a duplicate, or refused): its dead letter, if any."""
        yield from self._emit.events(step.events, traced=False)
        if step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)

    def _wake_parked(self, state: RunState, now_ms: int) -> Iterator[Any]:
        """On a timer of a parked run: at the end of input end it (dead letter), past a
        deadline reject what timed out and go on, else set its deadline timer again."""
        due = state.next_deadline_ms
        draining = self._input_end.draining
        if not draining and (due is None or due > now_ms):
            self._parked.park(state)  # another timer of the key (cleanup, a restored poll)
            return
        history = self._memory.load(now_ms)
        if draining:
            step = self._runtime.abandon_parked(state, now_ms)
        else:
            step = self._runtime.expire(state, now_ms)
        yield from self._continue(step, _totals(state), history, now_ms)

    def _wake_aside(self, now_ms: int) -> Iterator[Any]:
        """On a timer of a key with runs set aside: at the end of input end each parked one
        (`ApprovalPending` dead letter), else reject what timed out (`_step_aside`)."""
        for run_id, state in self._parked.aside_runs():
            if self._input_end.draining:
                if state.parked:
                    self._parked.take_aside(run_id)
                    step = self._runtime.abandon_parked(state, now_ms)
                    yield from self._end_aside(step, now_ms)
                continue
            due = state.next_deadline_ms
            if due is not None and due <= now_ms:
                step = self._runtime.expire(state, now_ms)
                yield from self._step_aside(step, state, now_ms)

    def _step_aside(self, step: Step, state: RunState, now_ms: int) -> Iterator[Any]:
        """Apply a decision or an expiry to a run set aside: it stays aside while parked, or
        while its key runs another (ready: `_resume_ready` takes it on), else goes on now."""
        if step.duplicate or step.state is state:
            yield from self._unchanged(step)
            return
        busy = self._busy(self._port.current_key())
        if step.state is not None and (step.state.parked or busy):
            yield from self._emit.events(step.events)
            self._parked.remember(step.settled, now_ms)
            self._parked.set_aside(step.state)
            return
        self._parked.take_aside(state.run_id)
        if step.state is None and busy:
            yield from self._end_aside(step, now_ms)
            return
        history = self._memory.load(now_ms)
        yield from self._continue(step, _totals(state), history, now_ms)

    def _end_aside(self, step: Step, now_ms: int) -> Iterator[Any]:
        """Emit the records of a set-aside run that ended without going on (rejected to an
        error, or abandoned at the end of input), leaving the key's `run` state alone; such
        an ending never changes the key's memory."""
        yield from self._emit.events(step.events, run_ended=True)
        self._parked.remember(step.settled, now_ms)
        if step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)
        yield from self._ended(step)

    def _resume_ready(self) -> Iterator[Any]:
        """Go on with the key's first ready set-aside run, with the key's memory as it is
        now; returns whether one went on."""
        state = self._parked.ready()
        if state is None:
            return False
        self._parked.take_aside(state.run_id)
        now = self._port.now_ms()
        history = self._memory.load(now)
        return (yield from self._apply_step(Step(state=state), _totals(state), history, now))
