"""Admission control for one model in one process: every attempt waits here for capacity.

Each attempt of a call (first tries and retries alike) is admitted before it is sent:

- a request bucket paced at the adaptive rate (`AdaptiveRate`: the configured
  `requests_per_minute`, lowered on 429s and probed back up; unlimited when none is
  configured and no 429 came yet);
- a token bucket at `tokens_per_minute`, charged with the call's estimated tokens
  (`token_estimate`) and corrected once the reply reports its usage (`settle`);
- at most `max_concurrent` attempts on the wire; a retry's backoff sleep holds none;
- a shared pause: a 429's Retry-After stops admission for the whole model until it has
  passed, plus a random extra of up to `PAUSE_JITTER` of it, so subtasks that got 429s
  together do not all start again at the same instant.

Buckets hold at most `BURST_S` seconds of their rate (and at least one call: a request, the
last call's tokens) and start empty at the first call, so a subtask that (re)starts never
bursts. An attempt too large for the token bucket goes out once the
bucket is full and leaves it in debt. Waiters are served one at a time in order, retries
first (they re-enter admission first in line), each as soon as the head can go: a timer
on the event loop, never a thread, does the waiting. Admission belongs to the event loop
of its calls; a model pickled into the SDK worker takes its settings, not its state.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from streamagents.connectors.providers.adaptive_rate import AdaptiveRate

__all__ = ["BURST_S", "PAUSE_JITTER", "Admission", "RateLimits", "Ticket"]

BURST_S = 0.05
"""Seconds of its rate a bucket holds at most (a request bucket holds one request at least):
small, so a subtask that fell behind (a busy CPU) does not catch up in a burst."""
PAUSE_JITTER = 0.1
"""The random extra added to a Retry-After pause, as a fraction of it."""


class RateLimits(BaseModel):
    """The limits on one model's calls: in a spec (`agent.model.limits`) the whole job's,
    shared out evenly over the operator's parallel subtasks (`share`); admission applies a
    subtask's share in its process, holding every attempt until it fits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_per_minute: float | None = Field(
        default=None, gt=0, description="Requests sent per minute at most; unset: no limit."
    )
    tokens_per_minute: float | None = Field(
        default=None,
        gt=0,
        description="Tokens (input plus output; estimated before a call, corrected from the "
        "usage its reply reports) used per minute at most; unset: not counted.",
    )
    max_concurrent: int | None = Field(
        default=None,
        ge=1,
        description="Requests on the wire at once at most; unset: no limit here "
        "(`max_in_flight` bounds it).",
    )
    adaptive: bool = Field(
        default=True,
        description="Slow down on 429s (Retry-After pauses a subtask's calls; the request rate "
        "drops and is probed back up), with or without configured limits.",
    )

    @property
    def configured(self) -> bool:
        """Whether a limit is set: requests, tokens or attempts at once."""
        return any(
            value is not None
            for value in (self.requests_per_minute, self.tokens_per_minute, self.max_concurrent)
        )

    @property
    def active(self) -> bool:
        """Whether admission has anything to do (a limit, or adapting to 429s)."""
        return self.adaptive or self.configured

    def share(self, parallelism: int) -> RateLimits:
        """One of `parallelism` subtasks' share: rates divided by it, `max_concurrent` too
        (rounded down, at least 1)."""
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        rpm, tpm, concurrent = self.requests_per_minute, self.tokens_per_minute, None
        if self.max_concurrent is not None:
            concurrent = max(1, self.max_concurrent // parallelism)
        return RateLimits(
            requests_per_minute=None if rpm is None else rpm / parallelism,
            tokens_per_minute=None if tpm is None else tpm / parallelism,
            max_concurrent=concurrent,
            adaptive=self.adaptive,
        )


@dataclass
class Ticket:
    """One admitted attempt: when it was admitted and the tokens it was charged."""

    admitted_at: float
    tokens: float
    waited_s: float


@dataclass
class _Waiter:
    tokens: float
    future: asyncio.Future[Ticket]
    since: float


class Admission:
    """Admits one model's attempts under its `RateLimits` (see the module docstring)."""

    def __init__(self, limits: RateLimits, rng: random.Random | None = None) -> None:
        self.limits = limits
        self._rng = rng or random.Random()
        self._reset()

    def _reset(self) -> None:
        limits = self.limits
        rpm = limits.requests_per_minute
        tpm = limits.tokens_per_minute
        configured = rpm is not None or tpm is not None
        self.rate = AdaptiveRate(None if rpm is None else rpm / 60, limits.adaptive, configured)
        self._token_rate = None if tpm is None else tpm / 60
        now = time.monotonic()
        self._requests = 0.0
        self._tokens = 0.0
        self._last_tokens = 0.0
        self._refilled = now
        self.paused_until = 0.0
        self.active = 0
        self._waiters: list[tuple[int, int, _Waiter]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.waited_s = 0.0
        """Seconds attempts have waited here in total."""
        self.limited_count = 0
        """429s reported to this admission."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the limits only; the state belongs to the process and loop it runs in."""
        return {"limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.limits = state["limits"]
        self._rng = random.Random()
        self._reset()

    @property
    def counts_tokens(self) -> bool:
        """Whether calls must bring a token estimate (a token limit is set)."""
        return self._token_rate is not None

    @property
    def token_level(self) -> float:
        """Tokens the token bucket held at its last refill (negative: in debt)."""
        return self._tokens

    def admitted_rate(self) -> float | None:
        """The request rate (per second) admission allows now; None for no limit."""
        return self.rate.rate(time.monotonic())

    async def admit(self, tokens: float = 0.0, retry: bool = False) -> Ticket:
        """Wait until the attempt may go out; `retry` puts it ahead of first tries."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._loop is not None:
                self._reset()  # a new loop (blocking `chat()` calls): waiters of the old are gone
            self._loop = loop
            self._refilled = time.monotonic()  # the buckets start filling at the first call
        now = time.monotonic()
        if not self._waiters and self._wait_s(tokens, now) == 0.0:
            return self._take(tokens, now, now)
        waiter = _Waiter(tokens, loop.create_future(), now)
        heapq.heappush(self._waiters, (0 if retry else 1, next(self._order), waiter))
        self._pump()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.settle(waiter.future.result())  # admitted as it was cancelled
            raise

    def settle(self, ticket: Ticket, used_tokens: int | None = None) -> None:
        """The attempt ended: free its slot and, when the reply reported its usage, charge
        the difference from the estimate (a refund when it used fewer)."""
        self.active -= 1
        if used_tokens is not None and self._token_rate is not None:
            self._tokens -= used_tokens - ticket.tokens
        if self._waiters:
            self._pump()

    def limited(self, ticket: Ticket, retry_after: float | None) -> None:
        """The attempt got a 429: pause admission for its Retry-After (jittered) and lower
        the rate; then free its slot."""
        now = time.monotonic()
        self.limited_count += 1
        if retry_after is not None:
            extra = self._rng.random() * PAUSE_JITTER * retry_after
            self.paused_until = max(self.paused_until, now + retry_after + extra)
        self._refill(now, self.rate.rate(now))  # the bucket filled at the old rate until now
        self.rate.limited(now, ticket.admitted_at)
        self._requests = min(self._requests, 0.0)
        self.settle(ticket)

    def _refill(self, now: float, rate: float | None) -> None:
        elapsed = now - self._refilled
        self._refilled = now
        if rate is not None:
            self._requests = min(max(1.0, rate * BURST_S), self._requests + rate * elapsed)
        if self._token_rate is not None:
            cap = max(self._token_rate * BURST_S, self._last_tokens)
            self._tokens = min(cap, self._tokens + self._token_rate * elapsed)

    def _wait_s(self, tokens: float, now: float) -> float | None:
        """Seconds until an attempt of `tokens` may go out; None while it waits for a slot."""
        if now < self.paused_until:
            return self.paused_until - now
        limits = self.limits
        if limits.max_concurrent is not None and self.active >= limits.max_concurrent:
            return None
        rate = self.rate.rate(now)
        if rate is None and self._token_rate is None:
            return 0.0
        self._refill(now, rate)
        if rate is not None and self._requests < 1.0:
            return (1.0 - self._requests) / rate
        if self._token_rate is not None:
            need = min(tokens, max(self._token_rate * BURST_S, self._last_tokens))
            if self._tokens < need:
                return (need - self._tokens) / self._token_rate
        return 0.0

    def _take(self, tokens: float, since: float, now: float) -> Ticket:
        if self.rate.bounded:
            self._requests -= 1.0
        self._tokens -= tokens
        self._last_tokens = tokens
        self.active += 1
        self.rate.admitted(now)
        self.waited_s += now - since
        return Ticket(admitted_at=now, tokens=tokens, waited_s=now - since)

    def _pump(self) -> None:
        """Admit waiting attempts in order while the head can go; else time the next look."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        while self._waiters:
            waiter = self._waiters[0][2]
            if waiter.future.done():  # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            wait = self._wait_s(waiter.tokens, now)
            if wait is None:
                return  # a slot frees in `settle`, which pumps again
            if wait > 0.0:
                assert self._loop is not None
                self._timer = self._loop.call_later(wait, self._pump)
                return
            heapq.heappop(self._waiters)
            waiter.future.set_result(self._take(waiter.tokens, waiter.since, now))
