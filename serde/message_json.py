"""`MessageJson`: each message's JSON, dumped once and remembered by message."""

from __future__ import annotations

from streamagents.serde.messages import ChatMessage

__all__ = ["MessageJson"]


class MessageJson:
    """The JSON (`model_dump_json`, UTF-8) of the messages seen lately, remembered by message.

    A key's history is the same message objects run after run, and a request is mostly that
    history: memory accounting (sizes) and requests sent to the SDK worker process (the
    bytes) dump each message once instead of on every run. An entry holds its message, so the
    `id()` it is found by cannot be reused by another object while it is kept (messages are
    immutable, so a text cannot go stale). Entries are bounded by the bytes they record, at
    most `max_bytes` together, the oldest dropped first.
    """

    def __init__(self, max_bytes: int = 16 << 20) -> None:
        self._max_bytes = max_bytes
        self._entries: dict[int, tuple[ChatMessage, bytes]] = {}
        self._bytes = 0

    def data(self, message: ChatMessage) -> bytes:
        """The message's JSON in UTF-8."""
        entry = self._entries.get(id(message))
        if entry is not None:
            return entry[1]
        data = message.model_dump_json().encode()
        self._entries[id(message)] = (message, data)
        self._bytes += len(data)
        while self._bytes > self._max_bytes:
            self._bytes -= len(self._entries.pop(next(iter(self._entries)))[1])
        return data

    def size(self, message: ChatMessage) -> int:
        """The size of its JSON in bytes (`memory.message_bytes`)."""
        return len(self.data(message))
