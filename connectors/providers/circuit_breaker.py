"""A circuit breaker for one model: stop calling it after consecutive failures, probe it
after a cool-down, and call it again once a probe succeeds.

States: `closed` (calls go through; `failure_threshold` failures in a row open it),
`open` (every call skips the model at once, until `cooldown_s` has passed since it
opened), `half_open` (up to `half_open_probes` calls go through as probes: a success
closes the breaker, a failure opens it again for another cool-down; other calls skip).
Only failures that say the model is unwell count (the failover conditions); a caller
reports a call that failed for another reason (a bad request) as `release`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from streamagents.connectors.durations import WaitSeconds

__all__ = ["BreakerSettings", "BreakerState", "CircuitBreaker", "Permit"]

BreakerState = Literal["closed", "open", "half_open"]


class BreakerSettings(BaseModel):
    """When a breaker opens, how long it stays open, and how many probes it lets through
    (a spec's `agent.model.failover.breaker`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failure_threshold: int = Field(
        default=5, ge=1, description="Failed calls in a row (failover conditions) that open it."
    )
    cooldown_s: WaitSeconds = Field(
        default=30.0,
        description="Seconds an open breaker skips its model before letting a probe through.",
    )
    half_open_probes: int = Field(
        default=1, ge=1, le=1000, description="Calls let through at once as probes when half open."
    )


@dataclass(frozen=True)
class Permit:
    """Leave to send one call: the breaker state it was given in, and whether it is a probe."""

    epoch: int
    probe: bool


class CircuitBreaker:
    """One model's breaker; `clock` is a monotonic clock in seconds (a test's fake one).

    A call asks `acquire()` first (None: skip the model), then reports its permit with
    exactly one of `success`, `failure` or `release`. An outcome reported for a permit given
    before the latest state change (a call that started before the breaker opened) changes
    nothing. Every state change is counted in `changes`."""

    def __init__(
        self, settings: BreakerSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._state: BreakerState = "closed"
        self._epoch = 0
        self._failures = 0
        self._opened_at = 0.0
        self._probing = 0
        self.changes: dict[BreakerState, int] = {"closed": 0, "open": 0, "half_open": 0}
        """How many times the breaker entered each state."""

    @property
    def state(self) -> BreakerState:
        """The state now (an open breaker past its cool-down reads as half open)."""
        if self._state == "open" and self._clock() - self._opened_at >= self.settings.cooldown_s:
            self._enter("half_open")
        return self._state

    def acquire(self) -> Permit | None:
        """Leave to call the model now (half open: as one of the probes), or None to skip it."""
        state = self.state
        if state == "closed":
            return Permit(self._epoch, probe=False)
        if state == "half_open" and self._probing < self.settings.half_open_probes:
            self._probing += 1
            return Permit(self._epoch, probe=True)
        return None

    def success(self, permit: Permit) -> None:
        """The call was answered: a probe closes the breaker, a closed one forgets its
        failures."""
        if not self._current(permit):
            return
        if permit.probe:
            self._enter("closed")
        self._failures = 0

    def failure(self, permit: Permit) -> None:
        """The call failed in a way that counts: a failed probe, or the threshold's worth in
        a row, opens the breaker."""
        if not self._current(permit):
            return
        self._failures += 1
        if permit.probe or self._failures >= self.settings.failure_threshold:
            self._opened_at = self._clock()
            self._enter("open")

    def release(self, permit: Permit) -> None:
        """The call ended without telling anything about the model's health."""
        self._current(permit)

    def _current(self, permit: Permit) -> bool:
        """Whether `permit` was given in the present state; a probe's slot is freed."""
        if permit.epoch != self._epoch:
            return False
        if permit.probe:
            self._probing -= 1
        return True

    def _enter(self, state: BreakerState) -> None:
        """Change to `state`: permits given before become stale, failures start from 0."""
        self._state = state
        self._epoch += 1
        self._probing = 0
        self._failures = 0
        self.changes[state] += 1
