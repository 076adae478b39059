"""A key's short-term history as the engine keeps it in keyed state: compact bytes.

History messages hold media only as store refs, but a ref is ~330 bytes of JSON of
which much repeats (field names, the digest inside the ref's URI), so the engine stores
the history as zlib-compressed JSON without null fields: 10 turns with 5 images each
take about a fifth of their JSON size. The write time travels with the messages for the
memory TTL check.
"""

from __future__ import annotations

import zlib

from pydantic import BaseModel, ConfigDict

from streamagents.serde.messages import ChatMessage

__all__ = ["StoredHistory"]

_LEVEL = 6


class StoredHistory(BaseModel):
    """A key's short-term history with when it was last written."""

    model_config = ConfigDict(frozen=True)

    updated_ms: int
    messages: list[ChatMessage]

    def encode(self) -> bytes:
        """The history as compressed JSON bytes."""
        return zlib.compress(self.model_dump_json(exclude_none=True).encode(), _LEVEL)

    @classmethod
    def decode(cls, data: bytes) -> StoredHistory:
        """Read back what `encode` wrote."""
        return cls.model_validate_json(zlib.decompress(data))
