"""The request rate admission allows, adapted to the provider's 429s (AIMD).

With a configured rate the adaptive rate starts there and never goes above it; without
one it is unlimited until the first 429. A 429 for a call admitted after the last
decrease sets the rate to `DECREASE` x the current rate, or, while there is none (no limit
configured, no 429 yet), x the rate calls were admitted at over the last `MEASURE_S`
seconds; one decrease per congestion event (the 429s of calls already out when the rate
dropped do not lower it again). From there
the rate climbs back by `PROBE` x the decreased rate each second, up to the configured
rate, so a job with no configured limit settles just under the provider's quota.

Under a configured limit (requests or tokens), an isolated 429 (none in the `MEASURE_S`
seconds before) does not lower the rate: paced at the quota, a call that lands just past a
window's edge is refused now and then, and the Retry-After pause alone sets that right; a
second one soon after does lower it.
"""

from __future__ import annotations

from collections import deque

__all__ = ["DECREASE", "MEASURE_S", "PROBE", "AdaptiveRate"]

DECREASE = 0.7
"""The rate after a 429, as a fraction of the rate calls were admitted at."""
PROBE = 0.05
"""What the rate gains each second after a decrease, as a fraction of the decreased rate."""
MEASURE_S = 10.0
"""How far back the admitted rate is measured."""
MIN_RATE = 1 / 60
"""The lowest rate a decrease sets: one call a minute."""


class AdaptiveRate:
    """Requests per second to admit now: `ceiling` (None: unlimited), lowered on 429s."""

    def __init__(
        self, ceiling: float | None, adaptive: bool = True, configured: bool | None = None
    ) -> None:
        self.ceiling = ceiling
        self.adaptive = adaptive
        self.configured = ceiling is not None if configured is None else configured
        """Whether a limit was configured (this rate or a token rate): isolated 429s only pause."""
        self._base: float | None = ceiling
        self._since = 0.0
        self.decreased_at = float("-inf")
        self._limited_at = float("-inf")
        self._admitted: deque[float] = deque()

    @property
    def bounded(self) -> bool:
        """Whether there is a rate at all (a configured one, or one a 429 set)."""
        return self._base is not None

    def rate(self, now: float) -> float | None:
        """The rate (per second) at `now`; None for no limit."""
        base = self._base
        if base is None or self.decreased_at == float("-inf"):
            return base
        rate = base * (1.0 + PROBE * (now - self._since))
        return rate if self.ceiling is None else min(rate, self.ceiling)

    def admitted(self, now: float) -> None:
        """Count a call admitted at `now` (for the measured rate; older ones are dropped)."""
        if self.adaptive:
            admitted = self._admitted
            admitted.append(now)
            if admitted[0] < now - MEASURE_S:
                admitted.popleft()

    def measured(self, now: float) -> float:
        """Calls admitted per second over the last `MEASURE_S` seconds."""
        admitted = self._admitted
        while admitted and admitted[0] < now - MEASURE_S:
            admitted.popleft()
        if not admitted:
            return 0.0
        return len(admitted) / max(1.0, min(MEASURE_S, now - admitted[0]))

    def limited(self, now: float, admitted_at: float) -> bool:
        """A call admitted at `admitted_at` got a 429 at `now`: decrease once per event;
        returns whether the rate went down."""
        if not self.adaptive or admitted_at < self.decreased_at:
            return False
        isolated = now - self._limited_at > MEASURE_S
        self._limited_at = now
        if isolated and self.configured:
            return False
        current = self.rate(now)
        basis = current if current is not None else self.measured(now) or 1.0
        self._base = max(MIN_RATE, DECREASE * basis)
        self._since = self.decreased_at = now
        return True
