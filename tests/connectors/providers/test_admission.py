"""Admission: retries first in line, the shared Retry-After pause, the token correction, the
adaptive rate, the subtask share, and a retry's backoff holding no concurrency permit."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.providers import RateLimits, RetryPolicy, create_model
from streamagents.connectors.providers.adaptive_rate import (
    DECREASE,
    MIN_RATE,
    PROBE,
    AdaptiveRate,
)
from streamagents.connectors.providers.admission import PAUSE_JITTER, Admission
from streamagents.serde.messages import ChatMessage


def test_a_retry_is_admitted_before_first_tries_that_waited_longer() -> None:
    async def scenario() -> list[str]:
        admission = Admission(RateLimits(max_concurrent=1, adaptive=False))
        holder = await admission.admit()
        order: list[str] = []

        async def wait(name: str, retry: bool) -> None:
            ticket = await admission.admit(retry=retry)
            order.append(name)
            admission.settle(ticket)

        first = asyncio.create_task(wait("first try", retry=False))
        await asyncio.sleep(0)
        again = asyncio.create_task(wait("retry", retry=True))
        await asyncio.sleep(0)
        admission.settle(holder)
        await asyncio.gather(first, again)
        return order

    assert asyncio.run(scenario()) == ["retry", "first try"]


def test_a_429s_retry_after_pauses_every_call_of_the_model_with_jitter() -> None:
    async def scenario(seed: int) -> tuple[float, float]:
        admission = Admission(RateLimits(), rng=random.Random(seed))
        ticket = await admission.admit()
        told = time.monotonic()
        admission.limited(ticket, retry_after=0.3)
        pause = admission.paused_until - told
        await admission.admit()  # another call, not the limited one
        return pause, time.monotonic() - told

    pauses = []
    for seed in range(5):
        pause, waited = asyncio.run(scenario(seed))
        assert 0.3 <= pause <= 0.3 * (1 + PAUSE_JITTER) + 0.01
        assert waited >= 0.3
        pauses.append(pause)
    assert max(pauses) - min(pauses) > 0.01  # subtasks do not all reopen at one instant


def test_the_token_estimate_is_corrected_from_the_usage_the_reply_reports() -> None:
    async def scenario() -> tuple[float, float, float]:
        admission = Admission(RateLimits(tokens_per_minute=6000, adaptive=False))
        before = admission.token_level
        ticket = await admission.admit(tokens=80)
        charged = admission.token_level
        admission.settle(ticket, used_tokens=30)
        return before, charged, admission.token_level

    before, charged, after = asyncio.run(scenario())
    assert before == 0.0  # buckets start empty: a (re)started subtask never bursts
    assert charged < -70  # it waited for 5 (all 50 ms of the rate hold), then took 80
    assert after == pytest.approx(charged + 50)  # 50 refunded: the call used 30, not 80


def test_the_adaptive_rate_drops_once_per_429_event_and_probes_back_to_the_ceiling() -> None:
    rate = AdaptiveRate(ceiling=None)
    assert rate.rate(0.0) is None  # no limit until the provider says so
    for i in range(100):
        rate.admitted(i * 0.05)  # 20 calls a second for 5 s
    assert rate.limited(5.0, admitted_at=4.9)
    assert rate.rate(5.0) == pytest.approx(DECREASE * 20)
    assert not rate.limited(5.01, admitted_at=4.95)  # out before the drop: same event
    assert rate.rate(7.0) == pytest.approx(DECREASE * 20 * (1 + 2 * PROBE))
    capped = AdaptiveRate(ceiling=10.0)
    capped.admitted(0.0)
    assert not capped.limited(1.0, admitted_at=0.0)  # an isolated 429 at a configured limit
    assert capped.limited(2.0, admitted_at=1.5)  # a second one soon after lowers it
    assert capped.rate(2.0) == pytest.approx(DECREASE * 10.0)
    assert capped.rate(1000.0) == 10.0


@given(
    ceiling=st.one_of(st.none(), st.floats(0.1, 1000)),
    events=st.lists(
        st.tuples(st.floats(0, 5), st.booleans(), st.floats(0, 1)), min_size=1, max_size=60
    ),
)
@settings(max_examples=200, deadline=None)
def test_the_adaptive_rate_stays_between_its_floor_and_the_configured_ceiling(
    ceiling: float | None, events: list[tuple[float, bool, float]]
) -> None:
    rate = AdaptiveRate(ceiling)
    now = 0.0
    for step, limited, age in events:
        now += step
        if limited:
            rate.limited(now, admitted_at=now - age)
        else:
            rate.admitted(now)
        current = rate.rate(now)
        if ceiling is not None:
            assert current is not None and MIN_RATE <= current <= ceiling
        elif current is not None:
            assert current >= MIN_RATE


def test_the_job_limits_are_shared_out_over_the_subtasks() -> None:
    limits = RateLimits(requests_per_minute=3000, tokens_per_minute=1_200_000, max_concurrent=10)
    share = limits.share(4)
    assert (share.requests_per_minute, share.tokens_per_minute) == (750, 300_000)
    assert share.max_concurrent == 2  # 10 // 4: rounded down so the job stays within 10
    assert RateLimits(max_concurrent=3).share(8).max_concurrent == 1  # never below one
    assert RateLimits().share(8) == RateLimits()


def test_a_retrys_backoff_holds_no_concurrency_permit_and_it_then_goes_first() -> None:
    """With one call on the wire at a time: `a` fails 503 and backs off; `b` goes during
    that backoff; `a`'s retry is then admitted before `c`, which waited longer."""
    failed: set[str] = set()

    def answer(request: RecordedRequest) -> StubReply:
        text = request.json["contents"][-1]["parts"][0]["text"]
        if text == "a" and "a" not in failed:
            failed.add("a")
            return StubReply({"error": {"code": 503, "message": "busy"}}, status=503)
        ok = {"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": "STOP"}]}
        return StubReply(ok, delay_s=0.4 if text == "b" else 0.0)

    async def scenario(model: Any) -> None:
        calls = []
        for text in "abc":
            calls.append(asyncio.create_task(model.achat([ChatMessage.user(text)])))
            await asyncio.sleep(0.05)
        await asyncio.gather(*calls)
        await model.aclose()

    with LoopbackStubServer(answer) as stub:
        retry = RetryPolicy(initial_delay_s=0.2, jitter=0.0)
        limits = RateLimits(max_concurrent=1)
        model = create_model(
            "gemini", "m", api_key="k", base_url=stub.url, retry=retry, limits=limits
        )
        asyncio.run(scenario(model))
        sent = [r.json["contents"][-1]["parts"][0]["text"] for r in stub.requests]
    assert sent == ["a", "b", "a", "c"]


def test_a_call_cancelled_on_the_wire_frees_its_concurrency_permit() -> None:
    """A run that times out cancels its call mid-request: the next call still goes out."""
    with LoopbackStubServer(lambda request: StubReply({}, delay_s=5.0)) as stub:
        model = create_model(
            "gemini", "m", api_key="k", base_url=stub.url, limits=RateLimits(max_concurrent=1)
        )

        async def scenario() -> int:
            hung = asyncio.create_task(model.achat([ChatMessage.user("slow")]))
            await asyncio.sleep(0.3)
            hung.cancel()
            await asyncio.gather(hung, return_exceptions=True)
            assert model.admission is not None
            active = model.admission.active
            await model.aclose()
            return active

        assert asyncio.run(scenario()) == 0


def test_an_isolated_429_under_a_token_limit_pauses_without_lowering_the_rate() -> None:
    async def scenario() -> tuple[float | None, float | None]:
        admission = Admission(RateLimits(tokens_per_minute=60_000))
        admission.limited(await admission.admit(tokens=1), retry_after=None)
        first = admission.admitted_rate()
        admission.limited(await admission.admit(tokens=1), retry_after=None)
        return first, admission.admitted_rate()

    first, second = asyncio.run(scenario())
    assert first is None  # the token limit stays in charge: no request rate imposed
    assert second is not None  # a second 429 soon after does set one
