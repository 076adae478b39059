"""The engine's loop thread and poll schedule, without Flink."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from streamagents.operators.engine.engine_loop import CoroutineEscaped, EngineLoop
from streamagents.operators.engine.poll_schedule import PollSchedule


@pytest.fixture()
def loop() -> Iterator[EngineLoop]:
    """A started loop with two slots, stopped after the test."""
    started = EngineLoop(max_in_flight=2).start()
    yield started
    started.stop()


def test_submitted_coroutine_result_arrives_with_its_timing(loop: EngineLoop) -> None:
    async def work() -> str:
        await asyncio.sleep(0.05)
        return "done"

    timed = loop.submit(work()).result(timeout=5)
    assert timed.value == "done"
    assert timed.seconds >= 0.04


def test_no_more_than_max_in_flight_coroutines_run_at_once(loop: EngineLoop) -> None:
    running, peak = 0, 0
    lock = threading.Lock()

    async def work() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        await asyncio.sleep(0.02)
        with lock:
            running -= 1

    futures = [loop.submit(work()) for _ in range(8)]
    for future in futures:
        future.result(timeout=5)
    assert peak == 2
    assert loop.in_flight == 0


def test_wait_for_slot_blocks_until_a_coroutine_finishes(loop: EngineLoop) -> None:
    release = threading.Event()

    async def held() -> None:
        while not release.is_set():
            await asyncio.sleep(0.01)

    first, _second = loop.submit(held()), loop.submit(held())
    assert loop.wait_for_slot(timeout_s=0.1) is False
    threading.Timer(0.1, release.set).start()
    started = time.monotonic()
    assert loop.wait_for_slot(timeout_s=5) is True
    assert time.monotonic() - started >= 0.05
    first.result(timeout=5)


def test_a_coroutine_started_soon_runs_while_every_slot_is_held(loop: EngineLoop) -> None:
    """What the agent function starts on the loop in open() (warming the model) neither
    waits for a slot nor holds one."""
    release = threading.Event()

    async def held() -> None:
        while not release.is_set():
            await asyncio.sleep(0.01)

    async def warm() -> str:
        return "warm"

    holders = [loop.submit(held()), loop.submit(held())]
    assert loop.start_soon(warm()).result(timeout=5) == "warm"
    assert loop.in_flight == 2
    release.set()
    for holder in holders:
        holder.result(timeout=5)


def test_stop_cancels_running_coroutines_and_runs_the_closer() -> None:
    loop = EngineLoop(max_in_flight=1).start()
    closed = []

    async def forever() -> None:
        await asyncio.sleep(3600)

    async def closer() -> None:
        closed.append(True)

    future = loop.submit(forever())
    loop.stop(closer)
    assert future.cancelled()
    assert closed == [True]


def test_first_poll_waits_for_the_estimated_completion() -> None:
    schedule = PollSchedule()
    for _ in range(30):
        schedule.observe("model", 200.0)
    assert 195 <= schedule.next_delay_ms("model", elapsed_ms=0) <= 205
    assert schedule.next_delay_ms("model", elapsed_ms=150) <= 55


def test_a_late_call_is_polled_again_after_a_fraction_of_the_estimate() -> None:
    schedule = PollSchedule()
    for _ in range(60):
        schedule.observe("tools", 1000.0)
    assert 99 <= schedule.next_delay_ms("tools", elapsed_ms=1500) <= 100
    assert schedule.next_delay_ms("unknown", elapsed_ms=0) == 21


def test_a_slow_first_call_does_not_make_the_fast_ones_after_it_wait() -> None:
    schedule = PollSchedule()  # the estimate starts at 20 ms
    schedule.observe("model", 300.0)  # the first call: a cold connection, say
    assert schedule.estimate_ms("model") == 76.0  # moved by a fifth of the way, not to 300
    for _ in range(3):
        schedule.observe("model", 5.0)
    assert schedule.next_delay_ms("model", elapsed_ms=0) <= 45


@pytest.mark.parametrize("exit_kind", [SystemExit, KeyboardInterrupt])
def test_a_coroutine_raising_system_exit_fails_its_call_and_the_loop_thread_lives_on(
    loop: EngineLoop, exit_kind: type[BaseException]
) -> None:
    async def quits() -> str:
        raise exit_kind(2)

    async def fine() -> str:
        await asyncio.sleep(0)
        return "done"

    with pytest.raises(CoroutineEscaped, match=f"raised {exit_kind.__name__}: 2"):
        loop.submit(quits()).result(timeout=5)
    with pytest.raises(CoroutineEscaped, match=exit_kind.__name__):
        loop.call(quits(), timeout_s=5)
    assert loop.submit(fine()).result(timeout=5).value == "done"
    assert loop.call(fine(), timeout_s=5) == "done"
    assert loop.in_flight == 0
