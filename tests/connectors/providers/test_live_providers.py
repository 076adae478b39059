"""Live calls to the real provider APIs; each runs only when its API key is set.

Run with e.g. `GEMINI_API_KEY=... pytest -m live tests/test_provider_live.py`. Models can
be chosen with STREAMAGENTS_LIVE_GEMINI_MODEL / STREAMAGENTS_LIVE_OPENAI_MODEL.
"""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from streamagents.connectors.providers import create_model
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart

GEMINI_KEY = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
OPENAI_KEY = os.environ.get("OPENAI_API_KEY")
GEMINI_MODEL = os.environ.get("STREAMAGENTS_LIVE_GEMINI_MODEL", "gemini-2.5-flash")
OPENAI_MODEL = os.environ.get("STREAMAGENTS_LIVE_OPENAI_MODEL", "gpt-4o-mini")

SWATCH_TOOL = ToolSpec(
    name="get_color_swatch",
    description="Returns an image of today's colour swatch.",
    parameters={"type": "object", "properties": {}},
)
QUESTION = ChatMessage.user(
    "Call get_color_swatch, look at the image it returns, and answer with the swatch's "
    "colour as one lowercase English word."
)


def red_png(size: int = 16) -> bytes:
    """A valid size x size solid red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def run_swatch_round_trip(provider: str, model_name: str, **options: object) -> str:
    """Ask for the swatch, answer the tool call with a red image, return the final text."""
    model = create_model(provider, model_name, **options)
    first = model.chat([QUESTION], [SWATCH_TOOL])
    assert first.message.tool_calls, f"expected a tool call, got {first.message.content!r}"
    call = first.message.tool_calls[0]
    result = ChatMessage.tool_result(
        call.id,
        call.name,
        [TextPart(text="Here is the swatch."), ImagePart(mime_type="image/png", data=red_png())],
    )
    final = model.chat([QUESTION, first.message, result], [SWATCH_TOOL])
    assert final.usage.input_tokens > 0
    return final.message.content.lower()


@pytest.mark.live
@pytest.mark.skipif(not GEMINI_KEY, reason="set GEMINI_API_KEY (or GOOGLE_API_KEY) to run")
def test_live_gemini_sees_media_returned_by_a_tool() -> None:
    legacy = not GEMINI_MODEL.startswith("gemini-3")
    answer = run_swatch_round_trip("gemini", GEMINI_MODEL, legacy_tool_media=legacy)
    assert "red" in answer


@pytest.mark.live
@pytest.mark.skipif(not OPENAI_KEY, reason="set OPENAI_API_KEY to run")
def test_live_openai_chat_completions_sees_media_returned_by_a_tool() -> None:
    assert "red" in run_swatch_round_trip("openai", OPENAI_MODEL)


@pytest.mark.live
@pytest.mark.skipif(not OPENAI_KEY, reason="set OPENAI_API_KEY to run")
def test_live_openai_responses_sees_media_returned_by_a_tool() -> None:
    assert "red" in run_swatch_round_trip("openai-responses", OPENAI_MODEL)
