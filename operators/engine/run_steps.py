"""A run's life on the engine: started from an input line, stepped with its calls' outcomes,
ended with its records, the key's next input then started.

`RunSteps` holds the engine's parts (see `engine.py`) and the steps every run takes;
`ParkedSteps` adds what decisions and deadlines do to runs waiting for approvals, and
`AgentEngine` the entry points a keyed operator calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from streamagents.operators.agent import AgentRuntime, RunState, Step
from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.agent.emitted_records import DeadLetter, OutputRecord
from streamagents.operators.agent.records import ErrorInfo, parse_input
from streamagents.operators.agent.run_state import ModelAction
from streamagents.operators.engine.emitter import Emitter
from streamagents.operators.engine.followup_timers import FollowupTimers
from streamagents.operators.engine.input_end import InputEnd
from streamagents.operators.engine.input_queue import InputQueue
from streamagents.operators.engine.key_memory import KeyMemory
from streamagents.operators.engine.keyed_port import KeyedPort, StateKind
from streamagents.operators.engine.metrics import EngineMetrics, UsageTotals
from streamagents.operators.engine.parked_runs import ParkedRuns
from streamagents.operators.engine.rolling_spend import Spent
from streamagents.operators.engine.run_driver import Call, CallRunner, RunDriver
from streamagents.operators.engine.spend_budgets import (
    Deferral,
    Refusal,
    SpendBudgets,
    tenant_of,
)
from streamagents.serde.messages import ChatMessage

__all__ = ["RunSteps", "usage_of"]


def usage_of(state: RunState) -> UsageTotals:
    """The calls, tokens and priced spend a run has used so far, as its state counts them."""
    return UsageTotals(
        state.model_calls,
        state.tool_calls,
        state.input_tokens,
        state.output_tokens,
        state.cached_tokens,
        state.priced_cost_usd,
        state.call_costs_usd.count(None),
    )


def _output_usage(output: OutputRecord) -> UsageTotals:
    """The calls, tokens and priced spend a finished run used, as its output record counts
    them."""
    usage = output.usage
    costs = output.call_costs_usd
    return UsageTotals(
        output.model_calls,
        output.tool_calls,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        sum(cost for cost in costs if cost is not None),
        costs.count(None),
    )


def _spent(before: UsageTotals, after: UsageTotals) -> Spent:
    """The tokens and priced dollars spent between two usage snapshots of a run."""
    tokens = after.tokens_in + after.tokens_out - before.tokens_in - before.tokens_out
    return Spent(max(0, tokens), max(0.0, after.cost_usd - before.cost_usd))


class RunSteps:
    """The engine's parts, and the steps of a run from its input line to its end."""

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
            port, runner, runtime, config.budgets.run_timeout_s, self._input_end, metrics, clock_s
        )
        self._spend = SpendBudgets(port, config)
        self._closed = False

    def _busy(self, key: str) -> bool:
        """Whether the key has a run in progress (a live call, or a run in its `run` state)."""
        return self._driver.busy(key) or self._run.value() is not None

    def _begin(self, raw: str | None) -> Iterator[Any]:
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
        if self._spend.enabled:
            self._charge(step, before, now_ms)
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
            self._metrics.usage(before, usage_of(state))
            if self._parked.goes_aside(state):
                self._parked.set_aside(state)
                self._run.clear()
                return False
            self._run.update(state.model_dump_json())
            self._parked.park(state)
            return True
        if state is not None:
            self._metrics.usage(before, usage_of(state))
            return (yield from self._perform(state, history, now_ms))
        yield from self._ended(step, before)
        if step.history is not None:
            self._memory.store(now_ms, step.history)
        self._run.clear()
        self._memory.arm_cleanup(now_ms if step.history is not None else None)
        return False

    def _charge(self, step: Step, before: UsageTotals, now_ms: int) -> None:
        """Charge what the run spent in this step to its key's and tenant's windows."""
        if step.state is not None:
            after, key, attributes = usage_of(step.state), step.state.key, step.state.attributes
        elif step.output is not None:
            after, key, attributes = (
                _output_usage(step.output),
                step.output.key,
                step.output.attributes,
            )
        else:
            return
        tenant = tenant_of(self._config, key, attributes)
        self._spend.charge(tenant, _spent(before, after), now_ms)

    def _perform(self, state: RunState, history: list[ChatMessage], now_ms: int) -> Iterator[Any]:
        """Keep the run and hand its pending action to the runner, unless a spend budget
        stops its model call: then the run ends or waits (see `spend_budgets.py`). Returns
        whether the run goes on."""
        refusal = None
        if self._spend.enabled and isinstance(state.pending, ModelAction):
            refusal = self._spend.refusal(state, now_ms)
        if refusal is None:
            self._run.update(state.model_dump_json())
            self._driver.issue(state, history, now_ms)
            return True
        if isinstance(refusal, Refusal) and (
            refusal.on_exceeded == "defer" and not self._input_end.draining
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
            self._run.update((step.state or state).model_dump_json())
            self._spend.defer(now_ms, refusal.room_at_ms)
            self._port.register_processing_timer(refusal.room_at_ms)
            self._metrics.runs_deferred.inc()
            return True
        error = refusal.error if isinstance(refusal, Refusal) else refusal
        ended = self._runtime.refuse(state, error, now_ms)
        return (yield from self._apply_step(ended, usage_of(state), history, now_ms))

    def _ended(self, step: Step, before: UsageTotals | None = None) -> Iterator[Any]:
        """A finished run's output, its count as finished or failed, its follow-ups kept;
        with `before`, the calls and tokens it used since then are counted too."""
        failed = step.dead_letter is not None
        if step.output is not None:
            if before is not None:
                self._metrics.usage(before, _output_usage(step.output))
            failed = failed or step.output.status != "ok"
            yield self._emit.output(step.output)
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

    def _settle(self, call: Call, key: str, now_ms: int) -> Iterator[Any]:
        """Advance the run with its call's outcome, time it out past its deadline, or look
        again later."""
        if call.future.done():
            self._driver.take(key)
            yield from self._harvest(call, now_ms)
        elif now_ms >= self._driver.deadline(call):
            self._driver.give_up(key, call)
            step = self._runtime.timeout(call.state, now_ms)
            yield from self._continue(step, usage_of(call.state), call.history, now_ms)
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
        yield from self._continue(step, usage_of(call.state), call.history, now_ms)

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
        deferral = self._spend.deferral() if self._spend.enabled else None
        if deferral is not None:
            yield from self._wake_deferred(state, deferral, now_ms)
            return
        history = self._memory.load(now_ms)
        self._emit.resume_trace(state)
        self._queue.count_restored()
        if self._driver.timed_out(state, now_ms):
            step = self._runtime.timeout(state, now_ms)
            yield from self._continue(step, usage_of(state), history, now_ms)
            return
        self._metrics.calls_reissued.inc()
        if not (yield from self._perform(state, history, now_ms)):
            yield from self._after_run()

    def _wake_deferred(self, state: RunState, deferral: Deferral, now_ms: int) -> Iterator[Any]:
        """A timer for a key whose run waits for a spend window: at its time (or when the
        input has ended) the run's model call is checked again; the time it waited does not
        count against `run_timeout_s`, as time parked for an approval does not."""
        if now_ms < deferral.until_ms and not self._input_end.draining:
            return  # another of the key's timers
        self._spend.end_deferral()
        waited = max(0, now_ms - deferral.since_ms)
        state = state.model_copy(update={"parked_ms": state.parked_ms + waited})
        history = self._memory.load(now_ms)
        if not (yield from self._perform(state, history, now_ms)):
            yield from self._after_run()

    def _resume_ready(self) -> Iterator[Any]:
        """Go on with the key's first ready set-aside run; returns whether one went on."""
        raise NotImplementedError

    def _wake_parked(self, state: RunState, now_ms: int) -> Iterator[Any]:
        """Apply a timer to the key's parked run."""
        raise NotImplementedError
