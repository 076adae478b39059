"""The threads sync tools run on, such that a hung tool cannot starve the healthy ones.

Sync calls run on daemon threads; a thread that finished its call waits up to
`idle_s` for the next one (starting a thread per call cost about 0.6 ms a call here;
reusing idle ones keeps the cost near a thread pool's). At most `max_workers` calls run at once;
more wait for a slot, and that wait is not part of their timeout, which counts only the
tool's own running time. A call that times out is *abandoned*: Python cannot stop its
thread, which runs on until the tool returns, but it gives its slot up at once, so the
next call starts on another thread. Abandoned threads are bounded: the threads busy in
a tool (running plus abandoned) never exceed `max_workers + max_abandoned`, and idle
ones never exceed `max_workers`; when abandoned calls hold all the spare room, a new call
fails at once with `ToolThreadsExhausted` instead of waiting on threads that may never
come back. An abandoned thread whose tool finally returns becomes an ordinary idle one.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["ToolThreads", "ToolThreadsExhausted"]


class ToolThreadsExhausted(RuntimeError):
    """Too many timed-out sync tools are still running to start another thread."""


class _Call:
    __slots__ = ("abandoned", "finished")

    def __init__(self) -> None:
        self.abandoned = False
        self.finished = False


class ToolThreads:
    """Runs sync callables on threads, at most `max_workers` at once, hung ones replaced."""

    def __init__(
        self, max_workers: int, max_abandoned: int | None = None, idle_s: float = 60.0
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.max_workers = max_workers
        self.max_abandoned = max_workers if max_abandoned is None else max_abandoned
        self._lock = threading.Lock()
        self._running = 0
        self._abandoned = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._idle_s = idle_s
        self._idle = 0  # threads waiting for work, less the work queued for them
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    @property
    def running(self) -> int:
        """Calls holding a slot (started and neither finished nor abandoned)."""
        return self._running

    @property
    def abandoned(self) -> int:
        """Timed-out calls whose thread still runs."""
        return self._abandoned

    async def _acquire(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._running < self.max_workers:
                    if self._running + self._abandoned >= self.max_workers + self.max_abandoned:
                        raise ToolThreadsExhausted(
                            f"{self._abandoned} timed-out sync tool calls are still running; "
                            "no new tool thread starts until some of them return"
                        )
                    self._running += 1
                    return
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await waiter
            except asyncio.CancelledError:
                with self._lock:
                    try:
                        self._waiters.remove((loop, waiter))
                    except ValueError:  # already woken: pass the wake on
                        self._wake_one()
                raise

    def _release(self) -> None:
        """Give a slot up (the lock is held) and wake one waiter."""
        self._running -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            loop, waiter = self._waiters.popleft()
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(_wake, waiter)
                return

    async def call(
        self, func: Callable[[], Any], timeout_s: float
    ) -> tuple[Any, BaseException | None]:
        """(result, None) or (None, exception) of `func()` on a thread; TimeoutError past
        `timeout_s` of its own running time (the thread is then abandoned)."""
        await self._acquire()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()
        state = _Call()

        def target() -> None:
            try:
                outcome: tuple[Any, BaseException | None] = (func(), None)
            except BaseException as exc:  # SystemExit from a tool is its error, nothing more
                outcome = (None, exc)
            with self._lock:
                state.finished = True
                if state.abandoned:
                    self._abandoned -= 1
                    return
                self._release()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, done, outcome)

        try:
            self._start(target)
        except BaseException:
            with self._lock:
                self._release()
            raise
        try:
            return await asyncio.wait_for(done, timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            with self._lock:
                if not state.finished:
                    state.abandoned = True
                    self._abandoned += 1
                    self._release()
            raise

    def _start(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name="tool", daemon=True).start()

    def _work(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                if self._idle >= self.max_workers:
                    return
                self._idle += 1
            try:
                job = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    try:
                        job = self._jobs.get_nowait()  # queued for us as we timed out
                    except queue.Empty:
                        self._idle -= 1
                        return


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _settle(
    done: asyncio.Future[tuple[Any, BaseException | None]],
    outcome: tuple[Any, BaseException | None],
) -> None:
    if not done.done():
        done.set_result(outcome)
