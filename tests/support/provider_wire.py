"""Helpers for provider wire tests: read what an SDK sent, whatever key spelling it used."""

from __future__ import annotations

import re
from typing import Any

from streamagents.serde.messages import ChatMessage, ToolCall, decode_base64

# Values under these keys are user data (tool args, tool output, JSON schemas): kept as is.
_OPAQUE_KEYS = {"args", "response", "parameters", "parameters_json_schema", "arguments"}


def snake(value: Any) -> Any:
    """`value` with every camelCase dict key turned into snake_case (user data untouched)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
            out[name] = item if name in _OPAQUE_KEYS else snake(item)
        return out
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def wire_bytes(text: str) -> bytes:
    """Bytes from wire base64 text, whichever alphabet (standard or URL-safe) the SDK used."""
    return decode_base64(text, "data")


def blob_bytes(blob: dict[str, Any]) -> bytes:
    """The bytes of a wire blob (`{"mime_type", "data"}`)."""
    return wire_bytes(blob["data"])


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt " + bytes(64)
MP3 = b"ID3\x04\x00" + bytes(64)
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(64)
PDF = b"%PDF-1.7\n" + bytes(range(64))
"""Small sample media of each kind the wire tests send."""


def turn(*results: ChatMessage) -> list[ChatMessage]:
    """A conversation that ends with the given tool results."""
    calls = [ToolCall(id=r.tool_call_id or "", name=r.name or "", arguments={}) for r in results]
    return [
        ChatMessage.user("look at the page"),
        ChatMessage(role="assistant", tool_calls=calls),
        *results,
    ]
