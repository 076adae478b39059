"""The end of a bounded input: far-future event-time timers that wake every busy key.

At the end of a bounded input Flink drops pending processing-time timers (FLINK-14231),
so a key whose run waits on one would never finish. Every key that is busy (a run, a
waiting follow-up, a run set aside) therefore also holds an event-time timer at
`FAR_FUTURE_MS`, deleted when the key is idle again (or every key ever seen would keep one
in state). The end of input lifts the watermark to its maximum and fires it: the subtask is
then draining, and each busy key is looked at again on event-time timers at increasing
far-future timestamps (re-arming at one timestamp starved all but two keys) until it is
idle.
"""

from __future__ import annotations

from enum import Enum

from streamagents.operators.engine.keyed_port import KeyContext

__all__ = ["FAR_FUTURE_MS", "InputEnd", "Phase"]

FAR_FUTURE_MS = 1 << 62
"""Event-time timers at or above this fire only when the end of input lifts the watermark."""


class Phase(Enum):
    """Where the subtask is in its input: running, or draining after its end. The engine
    reads it once per callback and hands it to the steps and parts that act on it."""

    RUNNING = "running"
    """Inputs and decisions may still come."""
    DRAINING = "draining"
    """The input has ended: no input or decision can come any more, processing-time timers
    no longer fire, and every busy key is finished on event-time timers."""


class InputEnd:
    """Whether the input has ended, and the timers that carry a key through the drain."""

    def __init__(self, port: KeyContext) -> None:
        self._port = port
        self.phase = Phase.RUNNING
        """`DRAINING` once the end of input has been seen."""
        self._last_ms = FAR_FUTURE_MS

    def hold(self) -> None:
        """Keep the current key's end-of-input timer (it has something to finish)."""
        self._port.register_event_timer(FAR_FUTURE_MS)

    def release(self) -> None:
        """Drop the current key's end-of-input timer (it is idle)."""
        self._port.delete_event_timer(FAR_FUTURE_MS)

    def ended_at(self, timestamp: int) -> None:
        """An event-time timer fired: the input has ended."""
        self.phase = Phase.DRAINING
        self._last_ms = max(self._last_ms, timestamp)

    def next_look(self) -> int:
        """Arm an event-time timer for the current key at the next drain timestamp."""
        self._last_ms += 1
        self._port.register_event_timer(self._last_ms)
        return self._last_ms
