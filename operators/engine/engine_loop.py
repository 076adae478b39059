"""The asyncio event loop, in a background thread, on which the engine runs agent calls.

The Flink task thread hands coroutines over with `submit` and gets a
`concurrent.futures.Future` back; it never awaits anything itself. At most
`max_in_flight` coroutines run at once (a semaphore on the loop side); `in_flight`
counts the submitted ones that have not finished yet, and `wait_for_slot` lets the task
thread block until that count is below the bound, which is how the engine pushes back on
its input. Waiting never needs the task thread, so it cannot deadlock against timers.

Nothing a coroutine raises ends the loop thread: a `SystemExit`, `KeyboardInterrupt` or
other `BaseException` that is not the loop's own cancellation resolves that coroutine's
future with a `CoroutineEscaped` error (an ordinary `Exception`, so the task thread that
reads the result is not asked to exit either), and should anything still escape
`run_forever`, the thread runs the loop again until `stop` asks it to end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["CoroutineEscaped", "EngineLoop", "Timed"]

T = TypeVar("T")


@dataclass(frozen=True)
class Timed(Generic[T]):
    """A coroutine's result with the moments (monotonic seconds) it started and finished."""

    value: T
    started: float
    finished: float

    @property
    def seconds(self) -> float:
        """How long the coroutine ran once it had a slot."""
        return self.finished - self.started


class CoroutineEscaped(RuntimeError):
    """A coroutine raised a `BaseException` (`SystemExit`, ...) that would end the loop."""


async def _contained(coroutine: Awaitable[T]) -> T:
    """Await `coroutine`; a non-`Exception` it raises (bar cancellation) becomes an error."""
    try:
        return await coroutine
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # SystemExit must not end the loop thread
        raise CoroutineEscaped(f"the call raised {type(exc).__name__}: {exc}") from exc


class EngineLoop:
    """Runs coroutines on one event loop thread, at most `max_in_flight` at a time."""

    def __init__(self, max_in_flight: int, name: str = "streamagents-loop") -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self._loop = asyncio.new_event_loop()
        self._semaphore: asyncio.Semaphore | None = None
        self._slots = threading.Condition()
        self._in_flight = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ready = threading.Event()
        self._stopping = False

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._semaphore = asyncio.Semaphore(self.max_in_flight)
        self._loop.call_soon(self._ready.set)
        while True:
            with contextlib.suppress(BaseException):  # keep serving the other calls
                self._loop.run_forever()
            if self._stopping:
                return

    def start(self) -> EngineLoop:
        """Start the loop thread and wait until it runs."""
        self._thread.start()
        self._ready.wait()
        return self

    @property
    def in_flight(self) -> int:
        """Submitted coroutines that have not finished (running or waiting for a slot)."""
        return self._in_flight

    def wait_for_slot(self, timeout_s: float | None = None) -> bool:
        """Block until fewer than `max_in_flight` coroutines are in flight; False on timeout."""
        with self._slots:
            return self._slots.wait_for(lambda: self._in_flight < self.max_in_flight, timeout_s)

    def wait(self, future: concurrent.futures.Future[Any], timeout_s: float) -> None:
        """Block until `future` is done or `timeout_s` has passed."""
        concurrent.futures.wait([future], timeout=timeout_s)

    def submit(self, coroutine: Awaitable[T]) -> concurrent.futures.Future[Timed[T]]:
        """Schedule `coroutine`; the future resolves to its result with timings."""
        with self._slots:
            self._in_flight += 1
        return asyncio.run_coroutine_threadsafe(_contained(self._bounded(coroutine)), self._loop)

    async def _bounded(self, coroutine: Awaitable[T]) -> Timed[T]:
        try:
            assert self._semaphore is not None
            async with self._semaphore:
                started = time.monotonic()
                value = await coroutine
                return Timed(value, started, time.monotonic())
        finally:
            with self._slots:
                self._in_flight -= 1
                self._slots.notify_all()

    def start_soon(self, coroutine: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Run `coroutine` on the loop, outside the bound, without waiting for it."""
        return asyncio.run_coroutine_threadsafe(_contained(coroutine), self._loop)

    def call(self, coroutine: Awaitable[T], timeout_s: float) -> T:
        """Run `coroutine` on the loop (outside the bound) and wait for its result."""
        return asyncio.run_coroutine_threadsafe(_contained(coroutine), self._loop).result(timeout_s)

    def stop(
        self, closer: Callable[[], Awaitable[Any]] | None = None, timeout_s: float = 5.0
    ) -> None:
        """Cancel what still runs, await `closer()` on the loop, then stop the thread."""
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if closer is not None:
                await closer()

        try:
            self.call(shutdown(), timeout_s)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        finally:
            self._stopping = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout_s)
