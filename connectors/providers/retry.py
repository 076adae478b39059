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
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from streamagents.connectors.providers.errors import (
    EmptyResponseError,
    ProviderError,
    RateLimited,
)
from streamagents.serde.chat import RetryAttempt

__all__ = [
    "RetryBudget",
    "RetryPolicy",
    "call_with_retries",
    "parse_retry_after",
    "policy_from",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long one call is retried."""

    max_retries: int = 3
    """Retries after the first attempt (0 disables retries, except the empty-reply one)."""
    initial_delay_s: float = 0.5
    """Backoff before the first retry."""
    max_delay_s: float = 20.0
    """Cap on one backoff (a longer Retry-After is still honoured, within max_elapsed_s)."""
    multiplier: float = 2.0
    """Growth of the backoff per retry."""
    jitter: float = 0.5
    """Fraction of each backoff drawn at random: the delay lies in [(1-jitter)*b, b]."""
    max_elapsed_s: float = 120.0
    """No retry starts once the call has taken this long (including the wait before it)."""

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


def policy_from(retry: RetryPolicy | None, max_retries: int | None) -> RetryPolicy:
    """The policy an adapter uses: `retry` (or the default) with `max_retries` applied."""
    policy = retry or RetryPolicy()
    return policy if max_retries is None else replace(policy, max_retries=max_retries)


class RetryBudget:
    """A token bucket shared by one model's calls, so an outage does not multiply traffic.

    Each call earns `ratio` tokens (up to `reserve`); each retry spends one. With the
    defaults retries stay near 20% of calls once the initial reserve of 10 is spent.
    """

    def __init__(self, ratio: float = 0.2, reserve: float = 10.0) -> None:
        self.ratio = ratio
        self.reserve = reserve
        self._tokens = reserve
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
    policy: RetryPolicy,
    budget: RetryBudget,
    rng: random.Random,
    retried: list[RetryAttempt] | None = None,
    paced: bool = False,
) -> T:
    """Await `send()` until it succeeds, retrying retryable `ProviderError`s per `policy`.

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
            elif paced and isinstance(error, RateLimited) and policy.max_retries > 0:
                delay = policy.backoff(0, rng)
                wait = max(delay, error.retry_after or 0.0)
                if time.monotonic() - started + wait > policy.max_elapsed_s:
                    raise
            else:
                if not error.retryable or retries >= policy.max_retries:
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
