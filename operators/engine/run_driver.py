"""The calls in flight: runs' pending actions on the loop, and the timers that look for them.

A run's pending action (a model call, tool calls) runs as a coroutine on a `CallRunner`
(the `EngineLoop` thread in a job), bounded by `max_in_flight`; the task thread never
awaits it. Its outcome reaches the task thread through a processing-time timer for its
key, set at the call's estimated completion time (`PollSchedule`), or, while draining at
the end of input, an event-time timer the engine sets (`InputEnd`). A call still running
at its deadline (the run's timeout plus a grace period) is given up.

When every slot is held (calls waiting in the model's admission for a Retry-After pause,
say), the task thread does not wait for one longer than `SLOT_WAIT_S`: the input waits in
its key's queue and a timer of the key starts it once a slot is free (`defer_start`), so
checkpoint barriers keep their cadence. Only when `max_waiting_inputs` inputs already wait
does the task thread block for a slot (backpressure).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from streamagents.operators.agent import Outcome, RunState
from streamagents.operators.engine.earliest_timeout import EarliestTimeout
from streamagents.operators.engine.engine_loop import Timed
from streamagents.operators.engine.keyed_port import KeyContext
from streamagents.operators.engine.metrics import EngineMetrics
from streamagents.operators.engine.poll_schedule import PollSchedule
from streamagents.serde.messages import ChatMessage

__all__ = ["SLOT_WAIT_S", "Call", "CallRunner", "RunDriver"]

TIMEOUT_GRACE_MS = 5000
"""How long past its run's timeout a call may still deliver before it is given up."""
SLOT_WAIT_S = 0.05
"""How long the task thread waits for a free slot before an input waits in keyed state."""
SLOT_LOOK_MS = 50
SLOT_LOOK_MAX_MS = 1000
"""How often a key whose input waits for a slot looks for one (see `defer_start`)."""


class CallRunner(Protocol):
    """Runs coroutines off the task thread, at most `max_in_flight` at a time."""

    max_in_flight: int

    @property
    def in_flight(self) -> int: ...

    def submit(
        self, coroutine: Awaitable[Outcome]
    ) -> concurrent.futures.Future[Timed[Outcome]]: ...

    def wait_for_slot(self, timeout_s: float | None = None) -> bool: ...

    def wait(self, future: concurrent.futures.Future[Timed[Outcome]], timeout_s: float) -> None:
        """Block until `future` is done or `timeout_s` has passed."""
        ...


@dataclass
class Call:
    """A run's pending action being performed on the runner."""

    state: RunState
    history: list[ChatMessage]
    future: concurrent.futures.Future[Timed[Outcome]]
    submitted: float
    kind: str
    poll_at: int | None = None
    drain_at: int | None = None


class RunDriver:
    """The subtask's live calls by key, when to look at each, and when to give one up.

    `clock_s` is the monotonic clock (seconds) the runner's `Timed` results use: call
    durations feed the poll schedule."""

    def __init__(
        self,
        port: KeyContext,
        runner: CallRunner,
        run_timeout_s: float,
        metrics: EngineMetrics,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._port = port
        self._clock_s = clock_s
        self._runner = runner
        self._run_timeout_s = run_timeout_s
        self._metrics = metrics
        self._calls: dict[str, Call] = {}
        self._earliest: EarliestTimeout[Call] = EarliestTimeout(self._calls)
        self._schedule = PollSchedule()
        self.deferred = 0
        """Inputs waiting in keyed state for a free slot (not counting restored ones)."""

    def of(self, key: str) -> Call | None:
        """The key's live call, if it has one."""
        return self._calls.get(key)

    def busy(self, key: str) -> bool:
        """Whether the key has a live call."""
        return key in self._calls

    def timed_out(self, state: RunState, now_ms: int) -> bool:
        """Whether a run without a live call is past its timeout."""
        return now_ms >= state.deadline_ms(self._run_timeout_s)

    def deadline(self, call: Call) -> int:
        """When a call still running is given up (its run's timeout plus a grace period)."""
        return call.state.deadline_ms(self._run_timeout_s) + TIMEOUT_GRACE_MS

    def issue(
        self, state: RunState, history: list[ChatMessage], action: Awaitable[Outcome]
    ) -> Call:
        """Hand the current key's pending `action` (performing `state`'s) to the runner; the
        caller arms the look for it."""
        call = Call(
            state=state,
            history=history,
            future=self._runner.submit(action),
            submitted=self._clock_s(),
            kind=state.pending.kind,
        )
        key = self._port.current_key()
        self._calls[key] = call
        self._earliest.add(key, call, state.deadline_ms(self._run_timeout_s))
        self._count()
        return call

    def arm(self, call: Call, now_ms: int) -> None:
        """Set the processing-time timer that looks for the call's outcome next (while the
        input runs; the drain looks on the engine's event-time timers)."""
        elapsed_ms = (self._clock_s() - call.submitted) * 1000
        delay = self._schedule.next_delay_ms(call.kind, elapsed_ms)
        call.poll_at = now_ms + max(1, min(delay, self.deadline(call) - now_ms))
        self._port.register_processing_timer(call.poll_at)

    def looks_at(self, call: Call, timestamp: int, event_time: bool) -> bool:
        """Whether the timer at `timestamp` (an event-time one: a drain look) is the one that
        looks for `call`."""
        return (call.drain_at if event_time else call.poll_at) == timestamp

    def take(self, key: str) -> None:
        """The key's call is no longer live (its outcome is being applied, or it was dropped)."""
        del self._calls[key]
        self._count()

    def give_up(self, key: str, call: Call) -> None:
        """Cancel a call past its deadline."""
        call.future.cancel()
        self.take(key)

    def observe(self, call: Call, timed: Timed[Outcome]) -> None:
        """Fold a finished call's duration into the poll schedule."""
        self._schedule.observe(call.kind, (timed.finished - call.submitted) * 1000)

    def wait(self, call: Call, timeout_s: float) -> None:
        """Block the task thread until the call is done or `timeout_s` has passed."""
        self._runner.wait(call.future, timeout_s)

    def wait_for_slot(self, now_ms: int, limit_s: float | None = None) -> bool:
        """Block until a call slot is free, at most until a live call's deadline is due, or
        `limit_s`; returns whether one is free."""
        earliest = self._earliest.earliest_ms()
        if earliest is None:
            timeout_s = 1.0
        else:
            timeout_s = max(0.01, (earliest + TIMEOUT_GRACE_MS - now_ms) / 1000)
        if limit_s is not None:
            timeout_s = min(timeout_s, limit_s)
        return self._runner.wait_for_slot(timeout_s)

    def defer_start(self, now_ms: int) -> None:
        """The current key's next input waits for a free slot: count it, arm its look."""
        self.deferred += 1
        self.look_for_slot(now_ms)

    def look_for_slot(self, now_ms: int) -> None:
        """Arm the timer at which the current key looks for a free slot again.

        Every key that waits so looks on its own timer, so the looks are spaced by how many
        wait per slot (`SLOT_LOOK_MS` each, up to `SLOT_LOOK_MAX_MS`)."""
        per_slot = self.deferred / self._runner.max_in_flight
        delay = min(SLOT_LOOK_MAX_MS, int(SLOT_LOOK_MS * max(1.0, per_slot)))
        self._port.register_processing_timer(now_ms + delay)

    def deferred_started(self) -> None:
        """An input that waited for a slot got one."""
        self.deferred = max(0, self.deferred - 1)  # restored waiting inputs were not counted

    def clear(self) -> None:
        """Forget every call (the function is closing)."""
        self._calls.clear()
        self._earliest.clear()

    def _count(self) -> None:
        """Move the in-flight and busy-key levels to the current counts."""
        self._metrics.in_flight.set(self._runner.in_flight)
        self._metrics.busy_keys.set(len(self._calls))
