"""Admission control: its cost per call, and what it does against a quota.

Two parts, each printed side by side from one run:

1. Cost per call, admission off against on: `Admission.admit` + `settle` on an asyncio
   loop (its fast path: nothing waits), the token estimate of a text and of an image
   request, and whole calls through the real `google-genai` SDK to a loopback stub
   (client CPU per call, process time, rounds alternated).
2. Against `QuotaDouble` (requests per 1 s window), many concurrent calls through the real
   SDK for `--seconds`: answered calls per second, 429s, calls that failed (they would be
   dead letters), with admission off, on with no limits (adaptive), and limits at the quota.

    python benchmarks/bench_limits.py [--calls 2000] [--seconds 10] [--quota 25]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import time
import zlib
from typing import Any

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import RateLimits, create_model
from streamagents.connectors.providers.admission import Admission
from streamagents.connectors.providers.token_estimate import estimate_input_tokens
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart
from streamagents.testing.quota_double import QuotaDouble

OFF = RateLimits(adaptive=False)
OK = {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    )


def admission_us(limits: RateLimits, calls: int) -> float:
    """Microseconds per admit + settle pair on the fast path (nothing waits)."""

    async def run() -> float:
        admission = Admission(limits)
        started = time.perf_counter()
        for _ in range(calls):
            ticket = await admission.admit(10.0)
            admission.settle(ticket, 10)
        return (time.perf_counter() - started) / calls * 1e6

    return asyncio.run(run())


def estimate_us(messages: list[ChatMessage], calls: int) -> float:
    """Microseconds per token estimate of `messages`."""
    started = time.perf_counter()
    for _ in range(calls):
        estimate_input_tokens("gemini", messages)
    return (time.perf_counter() - started) / calls * 1e6


def sdk_cpu_us(url: str, limits: RateLimits, calls: int, concurrent: int = 16) -> float:
    """Process CPU microseconds per call through the Gemini SDK to the loopback stub."""
    model = create_model("gemini", "m", api_key="k", base_url=url, limits=limits)
    history = [ChatMessage.user("where is my parcel? " * 10)]

    async def run() -> float:
        await model.achat(history)  # the client is built outside the measurement
        left = calls

        async def caller() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await model.achat(history)

        started = time.process_time()
        await asyncio.gather(*(caller() for _ in range(concurrent)))
        spent = time.process_time() - started
        await model.aclose()
        return spent / calls * 1e6

    return asyncio.run(run())


def quota_run(limits: RateLimits, quota: int, seconds: float) -> dict[str, Any]:
    """Concurrent calls against a quota of `quota` requests per 1 s window."""
    double = QuotaDouble(1.0, requests=quota)
    failed = 0
    with LoopbackStubServer(double) as stub:
        model = create_model("gemini", "m", api_key="k", base_url=stub.url, limits=limits)

        async def run() -> None:
            nonlocal failed

            def going() -> bool:
                return double.started is None or time.monotonic() < double.started + seconds

            async def caller() -> None:
                nonlocal failed
                while going():
                    try:
                        await model.achat([ChatMessage.user("how many parcels are late?")])
                    except Exception:
                        failed += 1

            await asyncio.gather(*(caller() for _ in range(48)))
            await model.aclose()

        asyncio.run(run())
    after = [t for t in double.figures.ok_at if 1.0 <= t < seconds]
    return {
        "ok_per_s": len(after) / (seconds - 1.0),
        "429s": double.figures.limited,
        "429s_after_first_window": sum(1 for t in double.figures.limited_at if t >= 1.0),
        "failed": failed,
    }


def main() -> None:
    """Run both parts and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--quota", type=int, default=25)
    args = parser.parse_args()

    print("admission cost per call (fast path, us; median of 5 rounds)")
    configs = {
        "adaptive only (default)": RateLimits(),
        "requests_per_minute 1e9": RateLimits(requests_per_minute=1e9),
        "rpm + tpm + max_concurrent": RateLimits(
            requests_per_minute=1e9, tokens_per_minute=1e12, max_concurrent=10**6
        ),
    }
    for name, limits in configs.items():
        figures = [admission_us(limits, args.calls * 10) for _ in range(5)]
        print(f"  {name:28} {statistics.median(figures):6.2f}")
    text = [ChatMessage.user("where is my parcel? " * 10)]
    image = [
        ChatMessage(
            role="user",
            parts=[
                TextPart(text="what is this?"),
                ImagePart(mime_type="image/png", data=_png(1600, 800)),
            ],
        )
    ]
    print(f"  token estimate, text message   {estimate_us(text, args.calls * 10):6.2f}")
    print(f"  token estimate, text + image   {estimate_us(image, args.calls * 10):6.2f}")

    print("\nwhole calls through google-genai to a loopback stub (process CPU us per call)")
    off, on = [], []
    with LoopbackStubServer(lambda request: OK) as stub:
        for _ in range(3):  # alternated, so drift hits both
            off.append(sdk_cpu_us(stub.url, OFF, args.calls))
            on.append(sdk_cpu_us(stub.url, RateLimits(requests_per_minute=1e9), args.calls))
    print(f"  admission off  {statistics.median(off):8.0f}   rounds {[round(v) for v in off]}")
    print(f"  admission on   {statistics.median(on):8.0f}   rounds {[round(v) for v in on]}")

    print(f"\nagainst a quota of {args.quota} requests/s, 48 callers, {args.seconds:.0f} s")
    print(f"  {'':28} {'ok/s':>6} {'429s':>6} {'after 1st window':>17} {'failed':>7}")
    for name, limits in (
        ("admission off", OFF),
        ("adaptive, no limits", RateLimits()),
        ("limits at the quota", RateLimits(requests_per_minute=args.quota * 60)),
    ):
        run = quota_run(limits, args.quota, args.seconds)
        print(
            f"  {name:28} {run['ok_per_s']:6.1f} {run['429s']:6d}"
            f" {run['429s_after_first_window']:17d} {run['failed']:7d}"
        )


if __name__ == "__main__":
    main()
