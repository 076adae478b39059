"""`TaskWatch`: a function whose task thread ended without closing it is closed anyway."""

from __future__ import annotations

import threading

from streamagents.operators.flink._task_watch import TaskWatch


def watch_from_a_thread(period_s: float, stop: bool) -> threading.Event:
    """Make a watch on a short-lived thread (as `open()` does on the task thread); return the
    event its `on_gone` sets."""
    gone = threading.Event()

    def task() -> None:
        watch = TaskWatch(gone.set, period_s=period_s)
        if stop:
            watch.stop()

    thread = threading.Thread(target=task)
    thread.start()
    thread.join()
    return gone


def test_the_watch_calls_on_gone_once_its_thread_has_ended() -> None:
    assert watch_from_a_thread(0.05, stop=False).wait(5), "on_gone was not called"


def test_a_stopped_watch_never_calls_on_gone() -> None:
    assert not watch_from_a_thread(0.05, stop=True).wait(0.5)


def test_the_watch_leaves_a_living_thread_alone() -> None:
    gone = threading.Event()
    watch = TaskWatch(gone.set, period_s=0.05)  # this thread lives on
    try:
        assert not gone.wait(0.5)
    finally:
        watch.stop()
