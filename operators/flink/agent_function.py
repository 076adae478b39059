"""The keyed agent function of the engine, and the side outputs it writes.

`AgentFunction` is a `KeyedProcessFunction` (thread mode) that keeps, per key, in keyed
state: the run in progress (`RunState` JSON), the queue of inputs waiting for it (arrival
order) and the short-term history. It drives an `AgentRuntime` one step at a time: all
state changes happen on the task thread (the runtime's media store hands its own calls
to a helper thread, see `TaskThreadStore`), `perform` runs on an `EngineLoop` thread. A call's
result reaches the task thread through a timer for its key, set at the call's estimated
completion time, or, when `max_waiting_inputs` inputs already wait in the subtask, in the
`process_element` of the key's next input, which waits for it (the task thread never
blocks for more than one call, so unaligned checkpoint barriers pass within one call).
At the end of a bounded input Flink drops processing-time timers, so every busy key also
holds a far-future event-time timer (deleted when the key is idle again, or every key
ever seen would keep one in state); the final watermark fires it and the function then
waits for that key's calls, re-arming at increasing timestamps until the key is idle.
After a restore a run without a live call has its pending action performed again (calls
are at-least-once; state and outputs are exactly-once with a transactional sink).

A follow-up a run scheduled (`schedule_followup`) is kept, when its run ends, in the key's
`followups` map state with a processing-time timer at its due time (and the key's
end-of-input timer); when it fires, the follow-up's input line starts a run, or waits in
the key's queue behind its run. At the end of a bounded input each waiting follow-up is a
`FollowupPending` dead letter. See docs/followups.md.

A run waiting for a person's decision on a tool call is parked: its state stays in keyed
state with a processing-time timer at its earliest approval deadline, and it has no call
on the loop (no slot, no thread). A decision (a canonical decision line from the parse
step) is applied at once, never queued. The key's later inputs wait in its queue, or, with
`while_parked: separate_run`, the parked run is set aside in the key's `parked_aside` map
state (by run id, with its deadline timer) and the next input runs at once; a set-aside run
whose approvals are settled goes on when the key has no run in progress, before its queued
inputs. A key with a parked run holds at most `max_inputs_per_parked_key` inputs (parked
runs and queued inputs); one more is a `ParkedKeyFull` dead letter (rules in
`agent.parked_keys`). At the end of a bounded input a parked run ends with an
`ApprovalPending` dead letter. See docs/approvals.md.

With a memory TTL, a run that ends sets a processing-time cleanup timer at its history's
expiry (the due time is kept in keyed state); when it fires on an idle key whose history
has expired, the history leaves state. Flink's own state TTL is not used: building its
config needs the Py4J gateway, which a TaskManager's embedded Python does not have.

With telemetry configured, each step's events also go to a `LiveTelemetry`, which builds
their OpenTelemetry spans and exports them from its own thread (see docs/observability.md).
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, OutputTag, RuntimeContext
from pyflink.datastream.functions import TimeDomain
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from streamagents.operators.agent import AgentRuntime, Outcome, RunState, Step
from streamagents.operators.agent.approvals import (
    forgotten,
    is_decision_line,
    read_decision_line,
    settled_entry,
    settled_fingerprint,
)
from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.agent.emitted_records import OutputRecord, dead_letter_record
from streamagents.operators.agent.followups import Followup, followup_line
from streamagents.operators.agent.parked_keys import goes_aside, next_ready, refusal, run_of_call
from streamagents.operators.agent.records import (
    ErrorInfo,
    InputRecord,
    numbered,
    parse_input,
)
from streamagents.operators.flink._earliest_base import EarliestBase
from streamagents.operators.flink._engine_loop import EngineLoop, Timed
from streamagents.operators.flink._frozen_heap import freeze_long_lived
from streamagents.operators.flink._metrics import EngineMetrics, UsageTotals
from streamagents.operators.flink._poll_schedule import PollSchedule
from streamagents.operators.flink._sdk_logging import quiet_sdk_loggers
from streamagents.operators.flink._stored_history import HistoryCache
from streamagents.operators.flink._task_thread_store import TaskThreadStore
from streamagents.operators.flink._task_watch import TaskWatch
from streamagents.operators.flink.eventlog_sink import EventLogSinkFunction
from streamagents.operators.otel_live import LiveTelemetry
from streamagents.serde.events import RunEvent
from streamagents.serde.messages import ChatMessage

__all__ = [
    "APPROVAL_REQUESTS_TAG",
    "DEAD_LETTERS_TAG",
    "EVENTS_TAG",
    "AgentFunction",
    "RuntimeFactory",
]

EVENTS_TAG = OutputTag("streamagents-events", Types.STRING())
"""Side output of the agent function: event-log records (JSON strings); empty when the
function writes its event log itself."""

DEAD_LETTERS_TAG = OutputTag("streamagents-dead-letters", Types.STRING())
"""Side output of both functions: dead-letter records (JSON strings)."""

APPROVAL_REQUESTS_TAG = OutputTag("streamagents-approval-requests", Types.STRING())
"""Side output of the agent function: approval request records (JSON strings)."""

MAX_SETTLED_PER_KEY = 256
"""Settled approvals a key remembers (to tell a duplicate decision from a stale one)."""

RuntimeFactory = Callable[[AgentConfig], AgentRuntime]
"""Builds the runtime a subtask drives, in `open()`; must be picklable (module level)."""

T = TypeVar("T")

FAR_FUTURE_MS = 1 << 62
"""Event-time timers at or above this fire only when the end of input lifts the watermark."""

_DRAIN_WAIT_S = 0.05
_TIMEOUT_GRACE_MS = 5000


@dataclass
class _Call:
    """A run's pending action being performed on the loop."""

    state: RunState
    history: list[ChatMessage]
    future: concurrent.futures.Future[Timed[Outcome]]
    submitted: float
    kind: str
    poll_at: int | None = None
    drain_at: int | None = None


def _totals(state: RunState) -> UsageTotals:
    return UsageTotals(
        state.model_calls,
        state.tool_calls,
        state.input_tokens,
        state.output_tokens,
        state.cached_tokens,
    )


def _output_totals(output: OutputRecord) -> UsageTotals:
    usage = output.usage
    return UsageTotals(
        output.model_calls,
        output.tool_calls,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
    )


class AgentFunction(KeyedProcessFunction):
    """Runs one agent run per key at a time, many keys concurrently, state in keyed state."""

    def __init__(
        self,
        config: AgentConfig,
        runtime_factory: RuntimeFactory,
        event_log: EventLogSinkFunction | None = None,
    ) -> None:
        self._config = config
        self._runtime_factory = runtime_factory
        self._event_log = event_log

    # -- lifecycle -------------------------------------------------------------------------

    def open(self, runtime_context: RuntimeContext) -> None:
        """Declare the keyed state, build the runtime, start the loop thread."""
        quiet_sdk_loggers()
        self._run = runtime_context.get_state(ValueStateDescriptor("run", Types.STRING()))
        self._history = runtime_context.get_state(
            ValueStateDescriptor("history", Types.PICKLED_BYTE_ARRAY())
        )
        self._cleanup_at = runtime_context.get_state(
            ValueStateDescriptor("cleanup_at", Types.LONG())
        )
        ttl = self._config.memory.ttl_seconds
        self._ttl_ms = None if ttl is None else math.ceil(ttl * 1000)
        self._queue = runtime_context.get_map_state(
            MapStateDescriptor("queue", Types.LONG(), Types.STRING())
        )
        self._queue_head = runtime_context.get_state(
            ValueStateDescriptor("queue_head", Types.LONG())
        )
        self._queue_tail = runtime_context.get_state(
            ValueStateDescriptor("queue_tail", Types.LONG())
        )
        self._unnamed = runtime_context.get_state(
            ValueStateDescriptor("inputs_without_id", Types.LONG())
        )
        self._settled = runtime_context.get_map_state(
            MapStateDescriptor("approvals_settled", Types.STRING(), Types.STRING())
        )
        self._followups = runtime_context.get_map_state(
            MapStateDescriptor("followups", Types.STRING(), Types.STRING())
        )
        self._followups_on = self._config.followups.enabled
        self._aside = runtime_context.get_map_state(
            MapStateDescriptor("parked_aside", Types.STRING(), Types.STRING())
        )
        self._separate = self._config.while_parked == "separate_run"
        self._steps = ThreadPoolExecutor(1, thread_name_prefix="streamagents-steps")
        runtime = self._off_task(self._runtime_factory, self._config)
        self._off_task(runtime.model.prepare)
        runtime.store = TaskThreadStore(runtime.store, self._steps)
        self._runtime = runtime
        self._loop = EngineLoop(self._config.max_in_flight).start()
        self._calls: dict[str, _Call] = {}
        self._earliest: EarliestBase[_Call] = EarliestBase(self._calls)
        self._schedule = PollSchedule()
        self._histories = HistoryCache()
        self._timeout_ms = int(self._config.budgets.run_timeout_s * 1000)
        self._limits = self._config.input_limits
        self._draining = False
        self._drain_ts = FAR_FUTURE_MS
        self._closed = False
        self._waiting = 0
        self._metrics = EngineMetrics(runtime_context.get_metrics_group().add_group("streamagents"))
        if self._event_log is not None:
            self._event_log.open(runtime_context, watch=False)  # closed with this function
        telemetry = self._config.telemetry
        self._telemetry = (
            None
            if telemetry is None
            else self._off_task(LiveTelemetry, telemetry, self._config.job_id)
        )
        self._watch = TaskWatch(self.close)
        freeze_long_lived()

    def close(self) -> None:
        """Stop the loop thread (cancelling calls still running) and close the runtime:
        at the end of bounded input, or when the task ended otherwise (`TaskWatch`)."""
        self._closed = True
        self._watch.stop()
        self._calls.clear()
        self._earliest.clear()
        self._loop.stop(self._runtime.aclose)
        if self._telemetry is not None:
            self._off_task(self._telemetry.close)
        self._steps.shutdown(wait=False)
        if self._event_log is not None:
            self._event_log.close()

    def _off_task(self, function: Callable[..., T], *args: Any) -> T:
        """Run `function` on the steps thread and wait for it: for what may open or touch
        pyarrow (building the runtime and its media store, telemetry), which deadlocks on
        the task thread (see `TaskThreadStore`). The runtime's steps run on the task thread:
        their media store calls make this hop themselves."""
        return self._steps.submit(function, *args).result()

    # -- input -----------------------------------------------------------------------------

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        """Queue the input behind its key's run, or start its run (waiting for a call slot).

        The task thread blocks only for one call: for a free slot before a run starts, or,
        when `max_waiting_inputs` inputs already wait in this subtask, for the busy key's
        current call, whose outcome it then applies here. Either way a checkpoint barrier
        (unaligned, overtaking the records buffered behind this one) is handled as soon as
        this input is placed, so checkpoints complete while a backlog waits.
        """
        key, raw = value[0], value[1]
        if is_decision_line(raw):
            yield from self._decide(key, raw, ctx)
            return
        yield from self._make_room(key, ctx)
        stored = None if key in self._calls else self._run.value()
        if stored is not None or self._separate:  # the key may have a parked run
            letter = self._no_room(key, raw, stored)
            if letter is not None:
                self._metrics.dead_letters.inc()
                yield DEAD_LETTERS_TAG, letter
                return
        if key in self._calls or stored is not None:
            self._enqueue(raw)
            return
        now = ctx.timer_service().current_processing_time()
        self._loop.wait_for_slot(self._max_block_s(now))
        yield from self._begin(raw, key, ctx)

    def _make_room(self, key: str, ctx: Any) -> Iterator[Any]:
        """While the subtask's waiting inputs are at their bound, settle the key's calls."""
        while self._waiting >= self._config.max_waiting_inputs and key in self._calls:
            call = self._calls[key]
            now = ctx.timer_service().current_processing_time()
            concurrent.futures.wait(
                [call.future], timeout=max(0, self._deadline(call) - now) / 1000
            )
            now = ctx.timer_service().current_processing_time()
            yield from self._settle(call, key, ctx, now)

    def _no_room(self, key: str, raw: str, stored: str | None) -> str | None:
        """The dead letter of an input its key, having a parked run, holds no more room for
        (see `parked_keys.refusal`); None when it has room or no parked run."""
        parked = len(list(self._aside.keys())) if self._separate else 0
        if stored is not None and RunState.model_validate_json(stored).parked:
            parked += 1
        if not parked:
            return None
        tail = self._queue_tail.value()
        queued = 0 if tail is None else tail - (self._queue_head.value() or 0)
        bound = self._config.max_inputs_per_parked_key
        error = refusal(parked + queued, bound, self._config.while_parked)
        if error is None:
            return None
        return dead_letter_record("queue", error, raw, key=key)

    def _max_block_s(self, now_ms: int) -> float:
        """How long the task thread may block for a slot before a timeout timer is due."""
        earliest = self._earliest.earliest_ms()
        if earliest is None:
            return 1.0
        due = earliest + self._timeout_ms
        return max(0.01, (due + _TIMEOUT_GRACE_MS - now_ms) / 1000)

    def _enqueue(self, raw: str) -> None:
        tail = self._queue_tail.value() or 0
        self._queue.put(tail, raw)
        self._queue_tail.update(tail + 1)
        self._count_waiting(1)

    def _count_waiting(self, change: int) -> None:
        self._waiting = max(0, self._waiting + change)  # restored parked queues are not counted
        self._metrics.waiting_inputs.set(self._waiting)

    def _dequeue(self) -> str | None:
        tail = self._queue_tail.value()
        if tail is None:
            return None
        head = self._queue_head.value() or 0
        raw = self._queue.get(head)
        self._queue.remove(head)
        self._count_waiting(-1)
        if head + 1 >= tail:
            self._queue_head.clear()
            self._queue_tail.clear()
        else:
            self._queue_head.update(head + 1)
        return raw

    def _number(self, record: InputRecord) -> InputRecord:
        """Give an input without an id its key's next position (see `records.numbered`).

        Runs start in arrival order, so the count kept in keyed state is the input's
        position among its key's inputs without an id; a restore brings back the count with
        the source offset, so a replay numbers the same lines the same way. Inputs with an
        id touch no state here.
        """
        if record.id_given:
            return record
        position = self._unnamed.value() or 0
        self._unnamed.update(position + 1)
        return numbered(record, position)

    # -- runs ------------------------------------------------------------------------------

    def _load_history(self, key: str, now_ms: int) -> list[ChatMessage]:
        stored = self._history.value()
        if stored is None:
            return []
        history = self._histories.decode(key, stored)
        if self._runtime.history_expired(history.updated_ms, now_ms):
            self._history.clear()
            self._histories.forget(key)
            return []
        return list(history.messages)

    def _begin(self, raw: str | None, key: str, ctx: Any) -> Iterator[Any]:
        """Start runs from `raw` and then the key's queue until one is pending or none is left."""
        while raw is not None:
            now = ctx.timer_service().current_processing_time()
            record = None
            try:
                record = self._number(parse_input(raw, self._config.key_field, self._limits))
                history = self._load_history(key, now)
                step = self._runtime.start(record, history, now, self._waiting_followups())
            except Exception as error:
                self._metrics.runs_failed.inc()
                self._metrics.dead_letters.inc()
                yield (
                    DEAD_LETTERS_TAG,
                    dead_letter_record(
                        "run",
                        ErrorInfo.from_exception(error),
                        raw,
                        key=key,
                        record_id=record.id if record is not None else None,
                    ),
                )
                raw = self._dequeue()
                continue
            self._metrics.runs_started.inc()
            if step.state is not None and not self._draining:
                ctx.timer_service().register_event_time_timer(FAR_FUTURE_MS)
            running = yield from self._apply_step(step, UsageTotals(), history, key, ctx, now)
            if running:
                return
            raw = self._dequeue()
        self._run.clear()
        if not self._draining and not self._waiting_followups() and self._aside.is_empty():
            # The key is idle: its end-of-input timer would otherwise stay in state forever.
            ctx.timer_service().delete_event_time_timer(FAR_FUTURE_MS)

    def _trace(self, events: list[RunEvent], run_ended: bool = False) -> None:
        """Hand a step's events to the live telemetry, when it is on."""
        if self._telemetry is not None:
            self._telemetry.events(events, run_ended=run_ended)
            self._count_spans()

    def _apply_step(
        self,
        step: Step,
        before: UsageTotals,
        history: list[ChatMessage],
        key: str,
        ctx: Any,
        now_ms: int,
    ) -> Iterator[Any]:
        """Emit a step's records and keep or end its run; returns whether the run goes on."""
        yield from self._emit_events(step.events)
        self._trace(step.events, run_ended=step.state is None)
        if step.dead_letter is not None:
            self._metrics.dead_letters.inc()
            yield DEAD_LETTERS_TAG, step.dead_letter.to_json()
        for request in step.approval_requests:
            yield APPROVAL_REQUESTS_TAG, request.to_json()
        for followup_id in step.cancelled:
            self._followups.remove(followup_id)
        self._remember(step.settled, now_ms)
        if step.state is not None and step.state.parked:
            if self._draining:  # the input has ended: no decision can come any more
                ended = self._runtime.abandon_parked(step.state, now_ms)
                return (yield from self._apply_step(ended, before, history, key, ctx, now_ms))
            self._metrics.usage(before, _totals(step.state))
            if goes_aside(self._config, step.state):
                self._set_aside(step.state, ctx)
                self._run.clear()
                return False
            self._run.update(step.state.model_dump_json())
            self._park(step.state, ctx)
            return True
        if step.state is not None:
            self._metrics.usage(before, _totals(step.state))
            self._run.update(step.state.model_dump_json())
            self._issue(step.state, history, key, ctx, now_ms)
            return True
        yield from self._ended(step, key, ctx, before)
        if step.history is not None:
            self._history.update(self._histories.encode(key, now_ms, step.history))
        self._run.clear()
        self._arm_cleanup(ctx, now_ms if step.history is not None else None)
        return False

    def _park(self, state: RunState, ctx: Any) -> None:
        """Leave a parked run in keyed state with a processing-time timer at its earliest
        approval deadline: no call slot, no thread, no future while it waits."""
        due = state.next_deadline_ms
        if due is not None:
            ctx.timer_service().register_processing_time_timer(due)

    def _waiting_followups(self) -> list[Followup]:
        """The key's follow-ups waiting in keyed state, by due time."""
        if not self._followups_on or self._followups.is_empty():
            return []
        waiting = [Followup.model_validate_json(v) for v in self._followups.values()]
        return sorted(waiting, key=lambda f: (f.due_ms, f.id))

    def _keep_followups(self, followups: list[Followup], key: str, ctx: Any) -> Iterator[Any]:
        """Keep the follow-ups a run scheduled in keyed state, each with a processing-time
        timer at its due time and the key's end-of-input timer; once the input has ended
        they go to the dead letters instead (see `_drop_followups`)."""
        if not followups:
            return
        if self._draining:
            yield from self._drop_followups(followups, key)
            return
        for followup in followups:
            self._followups.put(followup.id, followup.model_dump_json())
            ctx.timer_service().register_processing_time_timer(followup.due_ms)
        ctx.timer_service().register_event_time_timer(FAR_FUTURE_MS)

    def _drop_followups(self, followups: list[Followup], key: str) -> Iterator[Any]:
        """At the end of a bounded input: each waiting follow-up becomes a dead letter
        holding its input line, to send again when it should still run."""
        for followup in followups:
            self._followups.remove(followup.id)
            self._metrics.dead_letters.inc()
            error = ErrorInfo(
                type="FollowupPending",
                message=f"the input ended while follow-up {followup.id} waited for its due "
                f"time {followup.due_ms} (ms since the epoch); send the line again to run it",
            )
            line = followup_line(followup, self._config.key_field)
            record_id = json.loads(line)["id"]
            yield (
                DEAD_LETTERS_TAG,
                dead_letter_record("followup", error, line, key=key, record_id=record_id),
            )

    def _fire_followups(self, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """Start the runs of the key's follow-ups now due, in due order: queued behind the
        key's run like any input when it has one."""
        for followup in self._waiting_followups():
            if followup.due_ms > now_ms:
                break
            self._followups.remove(followup.id)
            line = followup_line(followup, self._config.key_field)
            if key in self._calls or self._run.value() is not None:
                self._enqueue(line)
            else:
                yield from self._begin(line, key, ctx)

    def _remember(self, settled: dict[str, str], now_ms: int) -> None:
        """Keep how approvals were settled, the key's latest `MAX_SETTLED_PER_KEY` of them."""
        if not settled:
            return
        for call_id, fingerprint in settled.items():
            self._settled.put(call_id, settled_entry(fingerprint, now_ms))
        for call_id in forgotten(self._settled.items(), MAX_SETTLED_PER_KEY):
            self._settled.remove(call_id)

    def _decide(self, key: str, raw: str, ctx: Any) -> Iterator[Any]:
        """Apply a decision to the key's run: parked or not, it never waits in the queue."""
        now = ctx.timer_service().current_processing_time()
        decision = read_decision_line(raw)
        aside = self._aside.get(run_of_call(decision.call_id))
        call = None if aside is not None else self._calls.get(key)
        stored = aside if aside is not None else self._run.value()
        state = call.state if call is not None else None
        if state is None and stored is not None:
            state = RunState.model_validate_json(stored)
        kept = self._settled.get(decision.call_id)
        settled = None if kept is None else settled_fingerprint(kept)
        step = self._runtime.decide(state, decision, now, settled, key)
        if aside is not None:
            assert state is not None
            yield from self._step_aside(step, state, key, ctx, now)
            return
        if step.duplicate or step.state is state:
            yield from self._unchanged(step)
            return
        if call is not None and step.state is not None:
            # its other call is running: its outcome is applied to the decided state
            yield from self._emit_events(step.events)
            self._trace(step.events)
            self._remember(step.settled, now)
            call.state = step.state
            self._run.update(step.state.model_dump_json())
            return
        assert state is not None
        history = self._load_history(key, now)
        yield from self._continue(step, _totals(state), history, key, ctx, now)

    def _unchanged(self, step: Step) -> Iterator[Any]:
        """A decision that changed no run (a duplicate, or refused): its dead letter, if any."""
        yield from self._emit_events(step.events)
        if step.dead_letter is not None:
            self._metrics.dead_letters.inc()
            yield DEAD_LETTERS_TAG, step.dead_letter.to_json()

    def _busy(self, key: str) -> bool:
        """Whether the key has a run in progress (a live call, or a run in its `run` state)."""
        return key in self._calls or self._run.value() is not None

    def _set_aside(self, state: RunState, ctx: Any) -> None:
        """Keep a run (`while_parked: separate_run`) in the key's `parked_aside` map state,
        with the timer of its earliest approval deadline."""
        self._aside.put(state.run_id, state.model_dump_json())
        self._park(state, ctx)

    def _step_aside(
        self, step: Step, state: RunState, key: str, ctx: Any, now_ms: int
    ) -> Iterator[Any]:
        """Apply a decision or an expiry to a run set aside: it stays aside while parked, or
        while its key runs another (ready: `_resume_ready` takes it on), else goes on now."""
        if step.duplicate or step.state is state:
            yield from self._unchanged(step)
            return
        busy = self._busy(key)
        if step.state is not None and (step.state.parked or busy):
            yield from self._emit_events(step.events)
            self._trace(step.events)
            self._remember(step.settled, now_ms)
            self._set_aside(step.state, ctx)
            return
        self._aside.remove(state.run_id)
        if step.state is None and busy:
            yield from self._end_aside(step, key, ctx, now_ms)
            return
        history = self._load_history(key, now_ms)
        yield from self._continue(step, _totals(state), history, key, ctx, now_ms)

    def _end_aside(self, step: Step, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """Emit the records of a set-aside run that ended without going on (rejected to an
        error, or abandoned at the end of input), leaving the key's `run` state alone; such
        an ending never changes the key's memory."""
        yield from self._emit_events(step.events)
        self._trace(step.events, run_ended=True)
        self._remember(step.settled, now_ms)
        if step.dead_letter is not None:
            self._metrics.dead_letters.inc()
            yield DEAD_LETTERS_TAG, step.dead_letter.to_json()
        yield from self._ended(step, key, ctx)

    def _ended(
        self, step: Step, key: str, ctx: Any, before: UsageTotals | None = None
    ) -> Iterator[Any]:
        """A finished run's output, its count as finished or failed, its follow-ups kept;
        with `before`, the calls and tokens it used since then are counted too."""
        failed = step.dead_letter is not None
        if step.output is not None:
            if before is not None:
                self._metrics.usage(before, _output_totals(step.output))
            failed = failed or step.output.status != "ok"
            yield step.output.to_json()
        (self._metrics.runs_failed if failed else self._metrics.runs_finished).inc()
        yield from self._keep_followups(step.followups, key, ctx)

    def _wake_aside(self, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """On a timer of a key with runs set aside: at the end of input end each parked one
        (`ApprovalPending` dead letter), else reject what timed out (`_step_aside`)."""
        for run_id, stored in list(self._aside.items()):
            state = RunState.model_validate_json(stored)
            if self._draining:
                if state.parked:
                    self._aside.remove(run_id)
                    step = self._runtime.abandon_parked(state, now_ms)
                    yield from self._end_aside(step, key, ctx, now_ms)
                continue
            due = state.next_deadline_ms
            if due is not None and due <= now_ms:
                step = self._runtime.expire(state, now_ms)
                yield from self._step_aside(step, state, key, ctx, now_ms)

    def _resume_ready(self, key: str, ctx: Any) -> Iterator[Any]:
        """Go on with the key's first ready set-aside run, with the key's memory as it is
        now; returns whether one went on."""
        if self._aside.is_empty():
            return False
        state = next_ready(RunState.model_validate_json(v) for v in self._aside.values())
        if state is None:
            return False
        self._aside.remove(state.run_id)
        now = ctx.timer_service().current_processing_time()
        history = self._load_history(key, now)
        step = Step(state=state)
        return (yield from self._apply_step(step, _totals(state), history, key, ctx, now))

    def _after_run(self, key: str, ctx: Any) -> Iterator[Any]:
        """The key's run ended or was set aside: a ready set-aside run goes on first, else
        the key's next queued input starts."""
        if (yield from self._resume_ready(key, ctx)):
            return
        yield from self._begin(self._dequeue(), key, ctx)

    def _emit_events(self, events: list[RunEvent]) -> Iterator[Any]:
        """Write a step's events to this subtask's event log when it has one (no side output,
        no second operator, no JSON: see docs/eventlog.md), else send them to the events
        output as JSON text."""
        if self._event_log is not None:
            if events:
                self._event_log.write_events(events)
            return
        if self._config.event_log_level == "off":  # made for telemetry only
            return
        for event in events:
            yield EVENTS_TAG, event.json()

    def _issue(
        self, state: RunState, history: list[ChatMessage], key: str, ctx: Any, now_ms: int
    ) -> None:
        """Hand the run's pending action to the loop and set the timer that looks for it."""
        call = _Call(
            state=state,
            history=history,
            future=self._loop.submit(self._runtime.perform(state, history)),
            submitted=time.monotonic(),
            kind=state.pending.kind,
        )
        self._calls[key] = call
        self._earliest.add(key, call, state.timeout_base_ms)
        self._count_calls()
        self._arm(call, ctx, now_ms)

    def _count_spans(self) -> None:
        """Move the telemetry counters to the exporter's figures (task thread only)."""
        assert self._telemetry is not None
        self._metrics.spans_exported.set(self._telemetry.exported)
        self._metrics.spans_dropped.set(self._telemetry.dropped)

    def _count_calls(self) -> None:
        """Move the in-flight and busy-key levels to the current counts (task thread only)."""
        self._metrics.in_flight.set(self._loop.in_flight)
        self._metrics.busy_keys.set(len(self._calls))

    def _arm(self, call: _Call, ctx: Any, now_ms: int) -> None:
        if self._draining:
            self._drain_ts += 1
            call.drain_at = self._drain_ts
            ctx.timer_service().register_event_time_timer(self._drain_ts)
            return
        elapsed_ms = (time.monotonic() - call.submitted) * 1000
        delay = self._schedule.next_delay_ms(call.kind, elapsed_ms)
        call.poll_at = now_ms + max(1, min(delay, self._deadline(call) - now_ms))
        ctx.timer_service().register_processing_time_timer(call.poll_at)

    def _arm_cleanup(self, ctx: Any, written_ms: int | None) -> None:
        """After a run: set the cleanup timer at the history's expiry (later if just written).

        The timer is set again even when its time is unchanged: one that fired while the
        key was busy did nothing, and the key is now (or soon) idle.
        """
        if self._ttl_ms is None:
            return
        due = self._cleanup_at.value()
        if written_ms is not None:
            if due is not None:
                ctx.timer_service().delete_processing_time_timer(due)
            due = written_ms + self._ttl_ms
            self._cleanup_at.update(due)
        if due is not None:
            ctx.timer_service().register_processing_time_timer(due)

    def _clean_up(self, timestamp: int) -> None:
        """On the cleanup timer of an idle key: drop its history, which has expired, and its
        count of inputs without an id, so a key that stays away leaves nothing in state.

        Every history write moves the due time to that write + TTL, so a timer that still
        finds its own time there fires after the history's expiry (no need to decode it).
        """
        if self._ttl_ms is None or self._cleanup_at.value() != timestamp:
            return
        if self._queue_tail.value() is not None:
            return
        if self._history.value() is not None:
            self._history.clear()
            self._metrics.histories_expired.inc()
        self._unnamed.clear()
        self._cleanup_at.clear()

    # -- timers ----------------------------------------------------------------------------

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        """Look for the key's call result: advance the run when it is there, else look later.

        A processing-time timer for a key without a live call is the memory cleanup timer
        (when the key has no run) or, after a restore, the cue to perform the run's action
        again. The cleanup timer of a busy key does nothing; the run's end sets it again.
        """
        if self._closed:
            return
        key = ctx.get_current_key()
        draining = ctx.time_domain() == TimeDomain.EVENT_TIME
        if draining:
            self._draining = True
            self._drain_ts = max(self._drain_ts, timestamp)
        now = ctx.timer_service().current_processing_time()
        if draining:
            yield from self._drop_followups(self._waiting_followups(), key)
        elif self._followups_on:
            yield from self._fire_followups(key, ctx, now)
        call = self._calls.get(key)
        polled = call is not None and (call.drain_at if draining else call.poll_at) == timestamp
        if (self._separate or not polled) and not self._aside.is_empty():
            yield from self._wake_aside(key, ctx, now)  # (`queue`: set aside before a restore)
        call = self._calls.get(key)
        if call is None:
            stored = self._run.value()
            if stored is None:
                if not draining:
                    self._clean_up(timestamp)
                return
            yield from self._resume(stored, key, ctx, now)
            return
        if (call.drain_at if draining else call.poll_at) not in (timestamp, None):
            return
        if draining and not call.future.done():
            concurrent.futures.wait([call.future], timeout=_DRAIN_WAIT_S)
            now = ctx.timer_service().current_processing_time()
        yield from self._settle(call, key, ctx, now)

    def _deadline(self, call: _Call) -> int:
        """When a call still running is given up (its run's timeout plus a grace period)."""
        return call.state.timeout_base_ms + self._timeout_ms + _TIMEOUT_GRACE_MS

    def _settle(self, call: _Call, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """Advance the run with its call's outcome, time it out past its deadline, or look
        again later."""
        if call.future.done():
            del self._calls[key]
            self._count_calls()
            yield from self._harvest(call, key, ctx, now_ms)
        elif now_ms >= self._deadline(call):
            call.future.cancel()
            del self._calls[key]
            self._count_calls()
            step = self._runtime.timeout(call.state, now_ms)
            yield from self._continue(step, _totals(call.state), call.history, key, ctx, now_ms)
        else:
            self._arm(call, ctx, now_ms)

    def _resume(self, stored: str, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """A timer for a key with a run but no live call: a parked run's deadline (or the
        end of input), or, after a restore, the cue to perform its action again."""
        state = RunState.model_validate_json(stored)
        if state.parked:
            yield from self._wake_parked(state, key, ctx, now_ms)
            return
        history = self._load_history(key, now_ms)
        if self._telemetry is not None:  # the run's span goes on from its restored state
            self._telemetry.spans.resume(
                state.run_id,
                self._config.job_id,
                state.key,
                state.started_ms,
                state.input_id,
                (state.input_tokens, state.output_tokens),
                state.messages,
            )
        tail = self._queue_tail.value()
        if tail is not None:  # count the restored queue towards `max_waiting_inputs`
            self._count_waiting(tail - (self._queue_head.value() or 0))
        if now_ms >= state.timeout_base_ms + self._timeout_ms:
            step = self._runtime.timeout(state, now_ms)
            yield from self._continue(step, _totals(state), history, key, ctx, now_ms)
            return
        self._metrics.calls_reissued.inc()
        self._issue(state, history, key, ctx, now_ms)

    def _wake_parked(self, state: RunState, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """On a timer of a parked run: at the end of input end it (dead letter), past a
        deadline reject what timed out and go on, else set its deadline timer again."""
        due = state.next_deadline_ms
        if not self._draining and (due is None or due > now_ms):
            self._park(state, ctx)  # another timer of the key (cleanup, a restored poll)
            return
        history = self._load_history(key, now_ms)
        if self._draining:
            step = self._runtime.abandon_parked(state, now_ms)
        else:
            step = self._runtime.expire(state, now_ms)
        yield from self._continue(step, _totals(state), history, key, ctx, now_ms)

    def _harvest(self, call: _Call, key: str, ctx: Any, now_ms: int) -> Iterator[Any]:
        """Advance the run with its call's outcome."""
        try:
            timed = call.future.result()
            self._schedule.observe(call.kind, (timed.finished - call.submitted) * 1000)
            if timed.value.kind == "model":
                self._metrics.model_latency(timed.value.latency_ms)
            step = self._runtime.advance(call.state, timed.value, now_ms, call.history)
        except Exception as error:
            yield from self._abandon(call, error, key, ctx, now_ms)
            return
        yield from self._continue(step, _totals(call.state), call.history, key, ctx, now_ms)

    def _continue(
        self,
        step: Step,
        before: UsageTotals,
        history: list[ChatMessage],
        key: str,
        ctx: Any,
        now_ms: int,
    ) -> Iterator[Any]:
        """Apply a step of a running run; when it ended, start the key's next input."""
        running = yield from self._apply_step(step, before, history, key, ctx, now_ms)
        if not running:
            yield from self._after_run(key, ctx)

    def _abandon(
        self, call: _Call, error: BaseException, key: str, ctx: Any, now_ms: int
    ) -> Iterator[Any]:
        """End a run whose call or step failed unexpectedly: dead letter, then the next input.

        The dead letter carries the input as received, read back from the media store when
        the run kept it there (off the task thread, see `TaskThreadStore`).
        """
        self._metrics.runs_failed.inc()
        self._metrics.dead_letters.inc()
        error_info = ErrorInfo.from_exception(error)
        yield DEAD_LETTERS_TAG, self._runtime.dead_letter(call.state, error_info).to_json()
        if self._telemetry is not None:
            self._telemetry.end(call.state.run_id)
        self._run.clear()
        self._arm_cleanup(ctx, None)
        yield from self._keep_followups(call.state.followups, key, ctx)
        yield from self._after_run(key, ctx)
