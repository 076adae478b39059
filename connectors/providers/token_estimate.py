"""How many tokens a request will use, estimated before it is sent (for the token bucket).

The estimate only has to be good enough to pace calls: after each call the admission
controller corrects it with the usage the provider reports (`Admission.settle`). The rules:

- text (message text, tool call arguments, tool specs): one token per 4 characters, as
  both providers document for English text;
- images, Gemini: 258 tokens when both sides are at most 384 px, else 258 per 768x768
  tile; OpenAI: 85 base tokens plus 170 per 512x512 tile after scaling into 2048x2048
  and the short side to 768 (high detail, which `auto` picks for large images). Sizes
  are read from PNG, GIF and JPEG headers of inline bytes; an image whose size is not at
  hand (a URL, a store ref) counts as 1024x1024;
- audio: Gemini 32 tokens per second; OpenAI publishes no rule, so 10 per second;
  video (Gemini): 263 per second (258 per frame at 1 frame/s plus its audio). Durations
  come from the size: 16 kB per second of audio, 250 kB per second of video;
- documents (PDF): Gemini 258 tokens per page; OpenAI about 1,000 per page (a page's
  text plus its image); pages are counted in inline bytes (`/Type /Page`), else 50 kB
  per page;
- output: the request's `max_tokens`/`max_output_tokens` when given, else the running
  mean of the output tokens replies reported (`OutputMean`).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from streamagents.serde.messages import ChatMessage, MediaRef

__all__ = ["OutputMean", "estimate_input_tokens", "image_size", "requested_output_tokens"]

CHARS_PER_TOKEN = 4
UNKNOWN_IMAGE_SIDE = 1024
AUDIO_BYTES_PER_S = 16_000
VIDEO_BYTES_PER_S = 250_000
PDF_BYTES_PER_PAGE = 50_000
_PAGE = re.compile(rb"/Type\s*/Page(?![s\w])")
_OUTPUT_OPTIONS = ("max_tokens", "max_output_tokens", "max_completion_tokens")


def estimate_input_tokens(family: str, messages: Sequence[Any], tools: Sequence[Any] = ()) -> int:
    """The input tokens of a request to a provider of `family` (`gemini` or `openai`)."""
    chars = 0
    media = 0
    for message in messages:
        if not isinstance(message, ChatMessage):
            chars += len(json.dumps(message, default=str))
            continue
        chars += len(message.content)
        for call in message.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments))
        for part in message.parts:
            if part.kind != "text":
                media += _media_tokens(family, part)
    for tool in tools:
        chars += len(json.dumps(tool.model_dump() if hasattr(tool, "model_dump") else tool))
    return chars // CHARS_PER_TOKEN + media


def requested_output_tokens(options: Mapping[str, Any]) -> int | None:
    """The output cap a request's generation options set, if any."""
    for name in _OUTPUT_OPTIONS:
        value = options.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class OutputMean:
    """The running mean of the output tokens replies reported (the guess when no cap is set)."""

    def __init__(self, initial: float = 0.0, weight: float = 0.1) -> None:
        self.value = initial
        self._weight = weight
        self._seen = False

    def observe(self, tokens: int) -> None:
        """Fold one reply's output tokens in (the first one replaces the initial guess)."""
        self.value = tokens if not self._seen else self.value + self._weight * (tokens - self.value)
        self._seen = True


def _media_tokens(family: str, part: Any) -> int:
    data: bytes | None = part.data
    ref: MediaRef | None = part.ref
    size = len(data) if data is not None else ref.size_bytes if ref is not None else 0
    if part.kind == "image":
        width, height = image_size(data) if data is not None else (None, None)
        if width is None or height is None:
            width = height = UNKNOWN_IMAGE_SIDE
        return _gemini_image(width, height) if family == "gemini" else _openai_image(width, height)
    if part.kind == "audio":
        return max(1, size // AUDIO_BYTES_PER_S) * (32 if family == "gemini" else 10)
    if part.kind == "video":
        return max(1, size // VIDEO_BYTES_PER_S) * 263
    pages = len(_PAGE.findall(data)) if data is not None else 0
    pages = pages or max(1, size // PDF_BYTES_PER_PAGE)
    return pages * (258 if family == "gemini" else 1000)


def _gemini_image(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return -(-width // 768) * -(-height // 768) * 258


def _openai_image(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = int(width * scale), int(height * scale)
    return 85 + 170 * -(-width // 512) * -(-height // 512)


def image_size(data: bytes) -> tuple[int | None, int | None]:
    """An image's width and height from its PNG, GIF or JPEG header; (None, None) if unknown."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None, None


def _jpeg_size(data: bytes) -> tuple[int | None, int | None]:
    """The frame size of a JPEG: the first start-of-frame marker's height and width."""
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None, None
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None, None
