"""Await work and get its exception back as a value, so only a deadline raises TimeoutError."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["result_or_error"]

T = TypeVar("T")


async def result_or_error(work: Awaitable[T]) -> tuple[T | None, Exception | None]:
    """(result, None) when `work` succeeds, (None, exception) when it raises."""
    try:
        return await work, None
    except Exception as exc:
        return None, exc
