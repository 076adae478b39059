"""Await work and get its exception back as a value, so only a deadline raises TimeoutError.

Any `BaseException` the work raises comes back as a value — `SystemExit` (argparse and
click exit that way on bad input) and `KeyboardInterrupt` included — except the awaiting
task's own cancellation (`asyncio.CancelledError`), which must keep propagating so that
timeouts and shutdown work. Letting `SystemExit` out of a task would end the event loop
that runs it, and with it every later call on that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["result_or_error"]

T = TypeVar("T")


async def result_or_error(work: Awaitable[T]) -> tuple[T | None, BaseException | None]:
    """(result, None) when `work` succeeds, (None, exception) when it raises."""
    try:
        return await work, None
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # SystemExit from a tool must not end the loop
        return None, exc
