"""The circuit breaker's state machine: opens after consecutive failures, skips while open,
lets a bounded number of probes through after the cool-down, closes on a probe's success."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from streamagents.connectors.providers.circuit_breaker import (
    BreakerSettings,
    CircuitBreaker,
    Permit,
)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def breaker(**given: float) -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    return CircuitBreaker(BreakerSettings(**given), clock), clock  # type: ignore[arg-type]


def test_it_opens_after_the_threshold_of_failures_in_a_row_and_skips_at_once() -> None:
    cb, _ = breaker(failure_threshold=3)
    for _ in range(2):
        cb.failure(cb.acquire())  # type: ignore[arg-type]
    cb.success(cb.acquire())  # type: ignore[arg-type]
    for _ in range(2):
        cb.failure(cb.acquire())  # type: ignore[arg-type]
    assert cb.state == "closed"  # a success in between started the count again
    cb.failure(cb.acquire())  # type: ignore[arg-type]
    assert cb.state == "open"
    assert cb.acquire() is None


def test_after_the_cooldown_one_probe_goes_through_and_its_success_closes_it() -> None:
    cb, clock = breaker(failure_threshold=1, cooldown_s=10)
    cb.failure(cb.acquire())  # type: ignore[arg-type]
    clock.now = 9.9
    assert cb.acquire() is None
    clock.now = 10.0
    probe = cb.acquire()
    assert probe is not None and probe.probe
    assert cb.acquire() is None  # one probe at a time
    cb.success(probe)
    assert cb.state == "closed"
    assert cb.changes == {"open": 1, "half_open": 1, "closed": 1}


def test_a_failed_probe_opens_it_for_another_cooldown() -> None:
    cb, clock = breaker(failure_threshold=5, cooldown_s=10)
    for _ in range(5):
        cb.failure(cb.acquire())  # type: ignore[arg-type]
    clock.now = 10.0
    cb.failure(cb.acquire())  # type: ignore[arg-type]
    assert cb.state == "open"
    clock.now = 19.9
    assert cb.acquire() is None


def test_a_call_that_started_before_it_opened_changes_nothing() -> None:
    cb, _ = breaker(failure_threshold=1, cooldown_s=10)
    early = cb.acquire()
    cb.failure(cb.acquire())  # type: ignore[arg-type]
    assert early is not None
    cb.success(early)  # a reply to a call sent before the outage proves nothing now
    assert cb.state == "open"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        BreakerSettings(failure_threshold=0)
    with pytest.raises(ValueError, match="cooldown_s"):
        BreakerSettings(cooldown_s=0)


class BreakerMachine(RuleBasedStateMachine):
    """Random calls, outcomes and clock moves against a reference model of the rules."""

    def __init__(self) -> None:
        super().__init__()
        self.settings = BreakerSettings(failure_threshold=3, cooldown_s=5.0, half_open_probes=2)
        self.clock = Clock()
        self.cb = CircuitBreaker(self.settings, self.clock)
        self.live: list[Permit] = []
        # the reference model
        self.state = "closed"
        self.failures = 0
        self.opened_at = 0.0
        self.probes_out = 0
        self.epoch = 0

    def _enter(self, state: str) -> None:
        self.state, self.epoch, self.probes_out, self.failures = state, self.epoch + 1, 0, 0

    def _now_state(self) -> str:
        if self.state == "open" and self.clock.now - self.opened_at >= self.settings.cooldown_s:
            self._enter("half_open")
        return self.state

    @rule()
    def acquire(self) -> None:
        state = self._now_state()
        permit = self.cb.acquire()
        if state == "closed":
            assert permit is not None and not permit.probe
        elif state == "half_open" and self.probes_out < self.settings.half_open_probes:
            assert permit is not None and permit.probe
            self.probes_out += 1
        else:
            assert permit is None
        if permit is not None:
            self.live.append(permit)

    def _outcome(self, index: int) -> tuple[Permit, bool]:
        permit = self.live.pop(index % len(self.live))
        current = permit.epoch == self.epoch
        if current and permit.probe:
            self.probes_out -= 1
        return permit, current

    @precondition(lambda self: self.live)
    @rule(index=st.integers(min_value=0))
    def succeed(self, index: int) -> None:
        permit, current = self._outcome(index)
        self.cb.success(permit)
        if current:
            if permit.probe:
                self._enter("closed")
            self.failures = 0

    @precondition(lambda self: self.live)
    @rule(index=st.integers(min_value=0))
    def fail(self, index: int) -> None:
        permit, current = self._outcome(index)
        self.cb.failure(permit)
        if current:
            self.failures += 1
            if permit.probe or self.failures >= self.settings.failure_threshold:
                self.opened_at = self.clock.now
                self._enter("open")

    @precondition(lambda self: self.live)
    @rule(index=st.integers(min_value=0))
    def release(self, index: int) -> None:
        permit, _ = self._outcome(index)
        self.cb.release(permit)

    @rule(seconds=st.sampled_from([0.5, 2.0, 5.0]))
    def wait(self, seconds: float) -> None:
        self.clock.now += seconds

    @invariant()
    def same_state_as_the_rules(self) -> None:
        assert self.cb.state == self._now_state()

    @invariant()
    def never_more_probes_than_allowed(self) -> None:
        assert 0 <= self.probes_out <= self.settings.half_open_probes


BreakerMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_the_breaker_follows_its_rules_under_any_sequence = BreakerMachine.TestCase
