"""Helpers for provider wire tests: read what an SDK sent, whatever key spelling it used."""

from __future__ import annotations

import re
from typing import Any

from streamagents.serde.messages import decode_base64

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
