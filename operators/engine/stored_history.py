"""A key's short-term history as the engine keeps it in keyed state: compact bytes.

History messages hold media only as store refs, but a ref is ~330 bytes of JSON of
which much repeats (field names, the digest inside the ref's URI), so the engine stores
the history as zlib-compressed JSON without null fields: 10 turns with 5 images each
take about a fifth of their JSON size. The write time travels with the messages for the
memory TTL check.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from streamagents.serde.messages import ChatMessage

__all__ = ["HistoryCache", "StoredHistory"]

_LEVEL = 1  # zlib's fastest: a third of level 6's time on a 40-message history, about as small


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


@dataclass
class _Kept:
    data: bytes
    history: StoredHistory
    texts: dict[int, str]
    """JSON text of each message of `history` dumped so far, by `id()` (the entry keeps
    the messages alive, so an id here is always theirs)."""


class HistoryCache:
    """The decoded histories of the keys that ran last, so a key's next run neither decodes
    its history again nor dumps the messages it kept to JSON again.

    An entry is used only when the bytes in keyed state are the ones it was made from, so
    the cache can never answer with a history the state does not hold (after a restore, a
    TTL clear or an eviction it decodes as before); at most `max_keys` entries are kept,
    the least recently used dropped first."""

    def __init__(self, max_keys: int = 512) -> None:
        self._max_keys = max_keys
        self._entries: OrderedDict[str, _Kept] = OrderedDict()

    def decode(self, key: str, data: bytes) -> StoredHistory:
        """The history `data` holds (what `StoredHistory.decode` returns)."""
        kept = self._entries.get(key)
        if kept is not None and kept.data == data:
            self._entries.move_to_end(key)
            return kept.history
        history = StoredHistory.decode(data)
        self._keep(key, _Kept(data, history, {}))
        return history

    def encode(self, key: str, updated_ms: int, messages: list[ChatMessage]) -> bytes:
        """The bytes of `StoredHistory(updated_ms, messages).encode()`, reusing the JSON of
        the messages this key's history already held."""
        kept = self._entries.get(key)
        known = kept.texts if kept is not None else {}
        texts = {}
        for message in messages:
            text = known.get(id(message))
            texts[id(message)] = (
                text if text is not None else message.model_dump_json(exclude_none=True)
            )
        body = ",".join(texts[id(message)] for message in messages)
        data = zlib.compress(f'{{"updated_ms":{updated_ms},"messages":[{body}]}}'.encode(), _LEVEL)
        history = StoredHistory.model_construct(updated_ms=updated_ms, messages=list(messages))
        self._keep(key, _Kept(data, history, texts))
        return data

    def forget(self, key: str) -> None:
        """Drop the key's entry (its history was cleared)."""
        self._entries.pop(key, None)

    def _keep(self, key: str, kept: _Kept) -> None:
        self._entries[key] = kept
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_keys:
            self._entries.popitem(last=False)
