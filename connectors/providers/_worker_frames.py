"""The frames the SDK worker process and its client exchange over the worker's pipes.

A frame is a 13-byte header (payload length + 9, one kind byte, a call id) and a payload.
Kinds: `S` setup (the pickled chat model, first frame), `Q` a request (`blobs`: the tools'
JSON, the options' JSON, then each message's JSON), `C` cancel a request; back: `K` ready (the
model is loaded), `R` a response (`ChatResponse` JSON), `E` the error a request raised
(`error_json`; call id 0: the model could not be loaded). Errors keep
their class name and, for a `ProviderError`, its facts, so the run records the same error
it would in-process.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from streamagents.connectors.providers.errors import ProviderError
from streamagents.serde.chat import RetryAttempt

__all__ = [
    "CANCEL",
    "ERROR",
    "HEADER_SIZE",
    "READY",
    "REQUEST",
    "RESPONSE",
    "SETUP",
    "RemoteError",
    "blobs",
    "error_from_json",
    "error_json",
    "frame",
    "parse_header",
    "read_frame",
    "split_blobs",
]

SETUP, READY, REQUEST, CANCEL, RESPONSE, ERROR = b"S", b"K", b"Q", b"C", b"R", b"E"
_HEADER = struct.Struct("!IcQ")
_LENGTH = struct.Struct("!I")
HEADER_SIZE = _HEADER.size


def parse_header(header: bytes) -> tuple[int, bytes, int]:
    """(payload length, kind, call id) of a frame's header."""
    length, kind, call_id = _HEADER.unpack(header)
    return length - 9, kind, call_id


def frame(kind: bytes, call_id: int, payload: bytes = b"") -> bytes:
    """One frame's bytes."""
    return _HEADER.pack(len(payload) + 9, kind, call_id) + payload


async def read_frame(reader: asyncio.StreamReader) -> tuple[bytes, int, bytes]:
    """The next frame: (kind, call id, payload); `IncompleteReadError` at the end."""
    length, kind, call_id = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return kind, call_id, await reader.readexactly(length - 9)


def blobs(items: list[bytes]) -> bytes:
    """Byte strings, each length-prefixed, as one payload."""
    out = bytearray()
    for item in items:
        out += _LENGTH.pack(len(item))
        out += item
    return bytes(out)


def split_blobs(payload: bytes) -> list[bytes]:
    """The byte strings of a `blobs` payload."""
    items = []
    at = 0
    while at < len(payload):
        (length,) = _LENGTH.unpack_from(payload, at)
        at += _LENGTH.size
        items.append(payload[at : at + length])
        at += length
    return items


class RemoteError(Exception):
    """An error the worker's request raised that is not a `ProviderError`; it is rebuilt as
    a subclass of this one named as the original class, so the run records the same type."""


_REMOTE_CLASSES: dict[str, type[RemoteError]] = {}


def error_json(error: Exception) -> bytes:
    """What the client needs to raise the same error: class name, message, provider facts."""
    data: dict[str, Any] = {"type": type(error).__name__}
    if isinstance(error, ProviderError):
        data.update(
            message=error.message,
            provider=error.provider,
            status=error.status,
            code=error.code,
            retry_after=error.retry_after,
            attempts=error.attempts,
            retries=[attempt.model_dump(mode="json") for attempt in error.retries],
            provider_error=True,
        )
    else:
        data["message"] = str(error)
    return json.dumps(data).encode()


def _provider_errors() -> dict[str, type[ProviderError]]:
    found: dict[str, type[ProviderError]] = {}
    pending: list[type[ProviderError]] = [ProviderError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def error_from_json(payload: bytes) -> Exception:
    """The error an `E` frame describes, rebuilt (see `error_json`)."""
    data = json.loads(payload)
    name = data["type"]
    if data.get("provider_error"):
        cls = _provider_errors().get(name, ProviderError)
        error = cls(
            data["message"],
            provider=data["provider"],
            status=data["status"],
            code=data["code"],
            retry_after=data["retry_after"],
        )
        error.attempts = data["attempts"]
        error.retries = [RetryAttempt.model_validate(r) for r in data["retries"]]
        return error
    remote = _REMOTE_CLASSES.get(name)
    if remote is None:
        remote = _REMOTE_CLASSES[name] = type(name, (RemoteError,), {})
    return remote(data["message"])
