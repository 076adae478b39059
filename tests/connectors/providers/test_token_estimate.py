"""Token estimates before a call: text by characters, media by each provider's rules."""

from __future__ import annotations

import struct
import zlib

from streamagents.connectors.providers.token_estimate import (
    OutputMean,
    estimate_input_tokens,
    image_size,
    requested_output_tokens,
)
from streamagents.serde.messages import ChatMessage, DocumentPart, ImagePart, TextPart


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", len(header))
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
    )


def _with_image(data: bytes) -> list[ChatMessage]:
    parts = [TextPart(text="x" * 40), ImagePart(mime_type="image/png", data=data)]
    return [ChatMessage(role="user", parts=parts)]


def test_text_counts_one_token_per_four_characters() -> None:
    assert estimate_input_tokens("gemini", [ChatMessage.user("a" * 400)]) == 100
    assert estimate_input_tokens("openai", [{"role": "user", "content": "b" * 30}]) > 7


def test_images_count_by_each_providers_tile_rule() -> None:
    assert image_size(_png(1000, 600)) == (1000, 600)
    small, large = _with_image(_png(300, 300)), _with_image(_png(1600, 800))
    assert estimate_input_tokens("gemini", small) == 10 + 258
    assert estimate_input_tokens("gemini", large) == 10 + 3 * 2 * 258  # 768 px tiles
    # OpenAI: 1600x800 -> short side to 768 -> 1536x768 -> 3x2 tiles of 512 -> 85 + 6 * 170
    assert estimate_input_tokens("openai", large) == 10 + 85 + 6 * 170


def test_a_pdf_counts_its_pages() -> None:
    pdf = b"%PDF-1.4 /Type /Pages /Type /Page x /Type /Page y /Type/Page z"
    message = ChatMessage(role="user", parts=[DocumentPart(mime_type="application/pdf", data=pdf)])
    assert estimate_input_tokens("gemini", [message]) == 3 * 258


def test_output_is_the_requests_cap_or_the_mean_of_replies() -> None:
    assert requested_output_tokens({"max_tokens": 300}) == 300
    assert requested_output_tokens({"temperature": 0.2}) is None
    mean = OutputMean()
    mean.observe(100)
    mean.observe(200)
    assert mean.value == 110
