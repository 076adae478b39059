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
- `SpendBudgets`: the key's and its tenant's spend windows, checked before each model
  call, and the runs they defer;
- `Emitter`: outputs, dead letters, approval requests and run events.

The steps themselves: a run's life in `run_steps.py` (`RunSteps`), what decisions and
deadlines do to parked runs in `parked_steps.py` (`ParkedSteps`); this module adds the
entry points.

All of it runs on the operator's task thread, through a `KeyedPort`, so the engine is
tested against `InMemoryKeyedPort` without a job. A run restored from a checkpoint without
a live call has its pending action performed again on its key's first timer (calls are
at-least-once; state and outputs are exactly-once with a transactional sink).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamagents.operators.agent.approvals import is_decision_line
from streamagents.operators.engine.parked_steps import ParkedSteps
from streamagents.operators.engine.run_driver import SLOT_WAIT_S

__all__ = ["AgentEngine"]

DRAIN_WAIT_S = 0.05
"""How long an end-of-input timer waits for a call before looking again on the next one."""


class AgentEngine(ParkedSteps):
    """Applies input lines and timers of the port's current key to its runs."""

    # -- input -----------------------------------------------------------------------------

    def process_input(self, raw: str) -> Iterator[Any]:
        """Queue an input line behind its key's run, or start its run (waiting for a slot);
        a decision line is applied at once, never queued.

        The task thread waits at most `SLOT_WAIT_S` for a free slot before a run starts; past
        that the input waits in its key's queue and the key's timer starts it once a slot
        frees. It blocks for longer only when `max_waiting_inputs` inputs already wait in
        this subtask: for a free slot, or for the busy key's current call, whose outcome it
        then applies here. Either way a checkpoint barrier
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
        now = self._port.now_ms()
        limit = None if self._queue.full else SLOT_WAIT_S
        if self._queue.has_lines() or not self._driver.wait_for_slot(now, limit):
            self._queue.push(raw)  # behind the key's inputs that already wait for a slot
            self._driver.defer_start(now)
            self._input_end.hold()
            return
        yield from self._begin(raw)

    def _make_room(self, key: str) -> Iterator[Any]:
        """While the subtask's waiting inputs are at their bound, settle the key's calls."""
        while self._queue.full and (call := self._driver.of(key)) is not None:
            now = self._port.now_ms()
            self._driver.wait(call, max(0, self._driver.deadline(call) - now) / 1000)
            yield from self._settle(call, key, self._port.now_ms())

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
            if stored is None and self._queue.has_lines():
                yield from self._start_waiting(now, draining)
                return
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

    def _start_waiting(self, now_ms: int, draining: bool) -> Iterator[Any]:
        """Start the key's first input that waited for a slot, once one is free (at the end
        of input: wait for it); else look again later."""
        if self._driver.wait_for_slot(now_ms, None if draining else 0.0):
            self._driver.deferred_started()
            yield from self._begin(self._queue.pop())
        elif draining:
            self._input_end.next_look()  # processing-time timers no longer fire
        else:
            self._driver.look_for_slot(now_ms)

    def _fire_followups(self, key: str, now_ms: int) -> Iterator[Any]:
        """Start the runs of the key's follow-ups now due, in due order: queued behind the
        key's run like any input when it has one."""
        for line in self._followups.take_due(now_ms):
            if self._busy(key):
                self._queue.push(line)
            else:
                yield from self._begin(line)

    def close(self) -> None:
        """Forget the live calls; timers that still fire do nothing."""
        self._closed = True
        self._driver.clear()
