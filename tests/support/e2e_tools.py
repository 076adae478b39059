"""Tools the operator e2e jobs give their agent; Flink's embedded Python imports this module.

They are ordinary tools (not doubles): the image tool returns real media bytes, the slow
ones report when they ran so a test can see that one turn's calls overlapped.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import tempfile
import time
from pathlib import Path

from streamagents.serde.messages import ImagePart, TextPart

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_bytes(seed: int, size: int = 100_000) -> bytes:
    """Deterministic image-like bytes for `seed` (a PNG signature, then hash-chained bytes)."""
    blocks = [PNG_SIGNATURE]
    block = f"streamagents-e2e-image-{seed}".encode()
    while sum(map(len, blocks)) < size:
        block = hashlib.sha256(block).digest()
        blocks.append(block)
    return b"".join(blocks)[:size]


def make_image(seed: int) -> list[object]:
    """Render the picture numbered `seed`.

    Args:
        seed: Which picture to render.
    """
    return [
        TextPart(text=f"picture {seed}"),
        ImagePart(mime_type="image/png", data=image_bytes(seed)),
    ]


def lookup_city(name: str) -> dict[str, str]:
    """Look up a city's country.

    Args:
        name: The city.
    """
    return {"city": name, "country": "France" if name == "Paris" else "unknown"}


def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


async def slow_a() -> str:
    """A slow tool that reports when it ran."""
    started = time.time()
    await asyncio.sleep(0.6)
    return f"a {started:.3f} {time.time():.3f}"


async def slow_b() -> str:
    """Another slow tool that reports when it ran."""
    started = time.time()
    await asyncio.sleep(0.6)
    return f"b {started:.3f} {time.time():.3f}"


def read_sensor() -> str:
    """Read the sensor (it is offline and always fails)."""
    raise RuntimeError("sensor offline")


def strict_cli(flag: str) -> str:
    """Run a command-line tool that exits on a flag it does not know (as argparse does).

    Args:
        flag: The flag to pass.
    """
    parser = argparse.ArgumentParser(prog="strict-cli", exit_on_error=True)
    parser.add_argument("--known", action="store_true")
    parser.parse_args([flag])  # an unknown flag: argparse prints usage and raises SystemExit(2)
    return "accepted"


async def interrupted() -> str:
    """An async tool that raises KeyboardInterrupt, as code waiting on a terminal may."""
    raise KeyboardInterrupt


REFUNDS = Path(tempfile.gettempdir()) / "streamagents-e2e-refunds"
"""Where `refund_order` leaves one file per call it made, so a test counts the calls."""


def refund_order(order: str, amount: float) -> str:
    """Refund an order (needs approval in the approval jobs).

    Args:
        order: Order number.
        amount: Amount in euros.
    """
    REFUNDS.mkdir(exist_ok=True)
    (REFUNDS / f"{order}.{time.time_ns()}").write_text(json.dumps({"amount": amount}))
    return f"refunded {amount:g} on {order}"


def refunds_made(order: str) -> list[float]:
    """The amounts `refund_order` refunded on `order`, one per call made."""
    files = sorted(REFUNDS.glob(f"{order}.*"))
    return [json.loads(f.read_text())["amount"] for f in files]


TOOL_PATHS = [
    f"{__name__}:{name}"
    for name in (
        "make_image",
        "lookup_city",
        "weather",
        "slow_a",
        "slow_b",
        "read_sensor",
        "strict_cli",
        "interrupted",
    )
]
