"""`RunDriver` on the in-memory port and the harness's manual runner: calls in flight by key,
the timer that looks for an outcome, the deadline past which a call is given up, and the
looks of keys whose inputs wait for a free slot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_harness import InMemoryMetricGroup, ManualRunner

from streamagents.operators.agent import Outcome, RunState
from streamagents.operators.agent.run_state import ModelAction
from streamagents.operators.engine.memory_port import DueTimer, InMemoryKeyedPort
from streamagents.operators.engine.metrics import EngineMetrics
from streamagents.operators.engine.run_driver import (
    SLOT_LOOK_MAX_MS,
    SLOT_LOOK_MS,
    TIMEOUT_GRACE_MS,
    RunDriver,
)

T0 = 1_000_000


def state(started_ms: int = T0, parked_ms: int = 0) -> RunState:
    pending = ModelAction(request_event_id="run-1.0002")
    return RunState(
        run_id="run-1",
        input_id="i",
        key="k",
        started_ms=started_ms,
        parked_ms=parked_ms,
        messages=[],
        pending=pending,
    )


async def answered() -> Outcome:
    return Outcome(kind="model", action_id="run-1.0002")


class Parts:
    """A driver over an in-memory port and a manual runner, with its metrics."""

    def __init__(self, max_in_flight: int = 2, run_timeout_s: float = 10.0) -> None:
        self.port = InMemoryKeyedPort(now_ms=T0).at("k")
        self.group = InMemoryMetricGroup()
        self.runner = ManualRunner(max_in_flight, self.port.current_key, self.clock_s)
        metrics = EngineMetrics(self.group)
        self.driver = RunDriver(self.port, self.runner, run_timeout_s, metrics, self.clock_s)

    def clock_s(self) -> float:
        return self.port.now_ms() / 1000


@pytest.fixture
def parts() -> Iterator[Parts]:
    made = Parts()
    yield made
    made.runner.drop_all()


def test_an_issued_call_is_live_for_its_key_until_taken(parts: Parts) -> None:
    call = parts.driver.issue(state(), [], answered())
    assert parts.driver.busy("k") and parts.driver.of("k") is call
    assert not parts.driver.busy("other")
    assert parts.group.counter("busy_keys").count == 1
    parts.driver.take("k")
    assert parts.driver.of("k") is None
    assert parts.group.counter("busy_keys").count == 0


def test_the_first_look_is_at_the_estimate_and_never_past_the_deadline(parts: Parts) -> None:
    call = parts.driver.issue(state(), [], answered())
    parts.driver.arm(call, T0)
    assert call.poll_at is not None and T0 < call.poll_at <= T0 + 1000
    assert parts.port.timers() == {DueTimer(call.poll_at, False, "k")}
    assert parts.driver.looks_at(call, call.poll_at, event_time=False)
    assert not parts.driver.looks_at(call, call.poll_at, event_time=True)
    late = parts.driver.deadline(call) - 1
    parts.driver.arm(call, late)
    assert call.poll_at == late + 1


def test_slow_calls_move_the_next_look_later(parts: Parts) -> None:
    first = parts.driver.issue(state(), [], answered())
    parts.driver.arm(first, T0)
    early = first.poll_at
    parts.port.advance_to(T0 + 900)
    parts.runner.complete(parts.runner.pending[0])
    parts.driver.observe(first, first.future.result())
    parts.driver.take("k")
    second = parts.driver.issue(state(), [], answered())
    parts.driver.arm(second, T0 + 900)
    assert early is not None and second.poll_at is not None
    assert second.poll_at - (T0 + 900) > early - T0


def test_a_run_times_out_at_its_deadline_without_the_time_it_was_parked(parts: Parts) -> None:
    run = state(started_ms=T0, parked_ms=2_000)
    assert not parts.driver.timed_out(run, T0 + 11_999)
    assert parts.driver.timed_out(run, T0 + 12_000)
    call = parts.driver.issue(run, [], answered())
    assert parts.driver.deadline(call) == T0 + 12_000 + TIMEOUT_GRACE_MS


def test_a_call_given_up_is_cancelled_and_no_longer_live(parts: Parts) -> None:
    call = parts.driver.issue(state(), [], answered())
    parts.driver.give_up("k", call)
    assert call.future.cancelled()
    assert parts.driver.of("k") is None and parts.runner.pending == []


def test_with_every_slot_held_the_wait_for_a_slot_says_no(parts: Parts) -> None:
    parts.runner.slots_held = True
    for key in ("a", "b"):
        parts.port.at(key)
        parts.driver.issue(state(), [], answered())
    assert not parts.driver.wait_for_slot(T0, 0.0)
    parts.runner.complete(parts.runner.pending[0])
    assert parts.driver.wait_for_slot(T0, 0.0)


def test_keys_waiting_for_a_slot_space_their_looks_by_how_many_wait(parts: Parts) -> None:
    parts.driver.defer_start(T0)
    assert parts.port.timers() == {DueTimer(T0 + SLOT_LOOK_MS, False, "k")}
    for _ in range(5):
        parts.driver.defer_start(T0)
    parts.driver.look_for_slot(T0 + 1)  # 6 waiting for 2 slots: 3 looks' worth apart
    assert DueTimer(T0 + 1 + 3 * SLOT_LOOK_MS, False, "k") in parts.port.timers()
    for _ in range(100):
        parts.driver.defer_start(T0)
    parts.driver.look_for_slot(T0 + 2)
    assert DueTimer(T0 + 2 + SLOT_LOOK_MAX_MS, False, "k") in parts.port.timers()
    parts.driver.deferred_started()
    assert parts.driver.deferred == 105
