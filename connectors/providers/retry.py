"""Retries for model calls: exponential backoff with jitter, Retry-After, and a shared budget.

The SDKs' own retries are switched off; every adapter retries here, so all providers
behave the same. Retried: 429, 5xx, malformed 2xx bodies, timeouts and connection
failures (`ProviderError.retryable`). Never retried: other 4xx and content errors. The
silent empty response (`EmptyResponseError`) gets exactly one extra attempt.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from streamagents.connectors.providers.errors import (
    EmptyResponseError,
    ProviderError,
    RateLimited,
)
from streamagents.serde.chat import RetryAttempt

__all__ = [
    "RetryBudget",
    "RetryBudgetSettings",
    "RetryPolicy",
    "call_with_retries",
    "parse_retry_after",
]

T = TypeVar("T")


class RetryPolicy(BaseModel):
    """How long one call's retries wait, and how long a call may keep retrying (how many
    retries it gets is the model's `max_retries`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_delay_s: float = Field(
        default=0.5, ge=0, allow_inf_nan=False, description="Backoff before the first retry."
    )
    max_delay_s: float = Field(
        default=20.0,
        ge=0,
        allow_inf_nan=False,
        description="Cap on one backoff (a longer Retry-After is still honoured, within "
        "max_elapsed_s).",
    )
    multiplier: float = Field(
        default=2.0, ge=1, allow_inf_nan=False, description="Growth of the backoff per retry."
    )
    jitter: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Fraction of each backoff drawn at random: the delay lies in "
        "[(1-jitter)*b, b].",
    )
    max_elapsed_s: float = Field(
        default=120.0,
        gt=0,
        allow_inf_nan=False,
        description="No retry starts once the call has taken this long (the wait before it "
        "included).",
    )

    @model_validator(mode="before")
    @classmethod
    def _retries_are_counted_elsewhere(cls, given: Any) -> Any:
        if isinstance(given, Mapping) and "max_retries" in given:
            raise ValueError(
                "retry.max_retries is no longer a retry setting: the number of retries is the "
                "model option max_retries (options: {max_retries: N}); retry holds the waits"
            )
        return given

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The jittered delay before retry number `retry` (0-based)."""
        base = min(self.max_delay_s, self.initial_delay_s * self.multiplier**retry)
        return base * (1.0 - self.jitter * rng.random())

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """The wait before a retry: the backoff, or, when the server sent Retry-After, that
        plus a random extra of up to `jitter` times the larger of it and the backoff, so calls
        told to wait alike do not all come back the instant the window reopens."""
        backoff = self.backoff(retry, rng)
        if retry_after is None:
            return backoff
        spread = self.jitter * max(retry_after, backoff)
        return max(backoff, retry_after + spread * rng.random())


class RetryBudgetSettings(BaseModel):
    """The size of a model's `RetryBudget`: what each call earns and the reserve."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ratio: float = Field(
        default=0.2, ge=0, allow_inf_nan=False, description="Retry tokens each call earns."
    )
    reserve: float = Field(
        default=10.0,
        ge=0,
        allow_inf_nan=False,
        description="Retry tokens the bucket holds at most, and starts with.",
    )


class RetryBudget:
    """A token bucket shared by one model's calls, so an outage does not multiply traffic.

    Each call earns `ratio` tokens (up to `reserve`); each retry spends one. With the
    default settings retries stay near 20% of calls once the initial reserve of 10 is spent.
    """

    def __init__(self, settings: RetryBudgetSettings | None = None) -> None:
        given = settings or RetryBudgetSettings()
        self.ratio = given.ratio
        self.reserve = given.reserve
        self._tokens = given.reserve
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def record_call(self) -> None:
        """Credit one first attempt."""
        with self._lock:
            self._tokens = min(self.reserve, self._tokens + self.ratio)

    def try_spend(self) -> bool:
        """Take one token for a retry; False when the budget is exhausted."""
        with self._lock:
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def call_with_retries(
    send: Callable[[], Awaitable[T]],
    max_retries: int,
    policy: RetryPolicy,
    budget: RetryBudget,
    rng: random.Random,
    retried: list[RetryAttempt] | None = None,
    paced: bool = False,
) -> T:
    """Await `send()` until it succeeds, retrying retryable `ProviderError`s up to
    `max_retries` times, waiting as `policy` says.

    Each failed attempt that is retried is appended to `retried` when given; an error
    raised at the end carries them too (`ProviderError.retries`). `paced` says an
    admission controller admits every attempt and honours Retry-After for the whole model
    (`admission`): a 429 is then retried after the first backoff alone, without counting
    against `max_retries` or spending the budget (its attempt waits in admission instead,
    first in line), while its Retry-After still fits in `max_elapsed_s`; `max_retries` 0
    still turns every retry off."""
    retried = [] if retried is None else retried
    started = time.monotonic()
    retries = 0
    empty_retried = False
    attempts = 0
    budget.record_call()
    while True:
        attempts += 1
        try:
            return await send()
        except ProviderError as error:
            error.attempts = attempts
            error.retries = list(retried)
            if isinstance(error, EmptyResponseError):
                if empty_retried:
                    raise
                empty_retried = True
                delay = policy.backoff(0, rng)
            elif paced and isinstance(error, RateLimited) and max_retries > 0:
                delay = policy.backoff(0, rng)
                wait = max(delay, error.retry_after or 0.0)
                if time.monotonic() - started + wait > policy.max_elapsed_s:
                    raise
            else:
                if not error.retryable or retries >= max_retries:
                    raise
                delay = policy.delay(retries, error.retry_after, rng)
                elapsed = time.monotonic() - started
                if elapsed + delay > policy.max_elapsed_s or not budget.try_spend():
                    raise
                retries += 1
            retried.append(
                RetryAttempt(
                    attempt=attempts,
                    ended_ms=time.time() * 1000,
                    error_type=type(error).__name__,
                    status=error.status,
                    backoff_ms=delay * 1000,
                )
            )
        await asyncio.sleep(delay)
