"""The longest wait a setting may give, and the type of a setting that is such a wait.

Flink takes timers in whole milliseconds, and a year is far beyond any wait a job means:
every wait or interval a config or job spec declares is bounded by `LONGEST_WAIT_S`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["LONGEST_WAIT_S", "WaitSeconds"]

LONGEST_WAIT_S = 365 * 24 * 3600.0
"""Longest wait or interval a config or job spec may give (Flink takes whole milliseconds)."""

WaitSeconds = Annotated[float, Field(gt=0, le=LONGEST_WAIT_S, allow_inf_nan=False)]
"""A wait in seconds: above 0, finite, at most `LONGEST_WAIT_S`."""
