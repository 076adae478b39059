"""When to look for a call's result: at its estimated completion time, not on a fixed beat.

Results reach the Flink task thread only through timers, so every look costs a timer
firing. The estimate is a moving average of how long calls of the same kind took from
submission to completion; a call still running at its estimate is looked at again after
a fraction of it, so a slow call costs a handful of firings and a fast one about one.
"""

from __future__ import annotations

__all__ = ["PollSchedule"]


class PollSchedule:
    """Moving-average completion estimates per call kind, turned into poll delays."""

    def __init__(
        self,
        initial_ms: float = 20.0,
        weight: float = 0.2,
        min_delay_ms: float = 1.0,
        max_delay_ms: float = 1000.0,
        retry_fraction: float = 0.1,
    ) -> None:
        self._initial_ms = initial_ms
        self._weight = weight
        self._min_ms = min_delay_ms
        self._max_ms = max_delay_ms
        self._retry_fraction = retry_fraction
        self._estimates: dict[str, float] = {}

    def estimate_ms(self, kind: str) -> float:
        """The current completion estimate for calls of `kind`."""
        return self._estimates.get(kind, self._initial_ms)

    def observe(self, kind: str, completion_ms: float) -> None:
        """Fold one observed submission-to-completion time into the estimate, which starts
        at `initial_ms`: a kind's first calls (connection set-up, the first media read, so
        often the slowest) move it by `weight` like any other, rather than setting it alone
        and making the fast calls after them wait for it."""
        old = self.estimate_ms(kind)
        self._estimates[kind] = old + self._weight * (completion_ms - old)

    def next_delay_ms(self, kind: str, elapsed_ms: float) -> int:
        """How long to wait before the next look at a call of `kind` running `elapsed_ms`."""
        estimate = self.estimate_ms(kind)
        remaining = estimate - elapsed_ms
        delay = max(remaining + 1.0, self._retry_fraction * estimate, self._min_ms)
        return int(min(delay, self._max_ms))
