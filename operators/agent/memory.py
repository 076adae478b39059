"""Short-term memory: the conversation a key keeps across runs, bounded and optionally expiring.

Sensory memory is the current run's messages (`RunState.messages`); when a run ends they are
appended to the key's short-term history, which `trim_history` then bounds by message count
and by bytes (the JSON size of the messages, media counted as refs), dropping the oldest
first (the runtime's `serde.message_json.MessageJson` remembers each message's size, so
a key's kept messages are not dumped to JSON again on every run). A history never starts in
the middle of a run: after dropping, leading messages that are not user messages (an
assistant's tool calls, tool results) are dropped too, so a provider never sees a tool
result without the call it answers. `history_expired` says whether the history outlived its TTL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from streamagents.serde.messages import ChatMessage

__all__ = [
    "TrimResult",
    "history_expired",
    "message_bytes",
    "trim_history",
]


class TrimResult(BaseModel):
    """The bounded history and what was dropped to bound it."""

    model_config = ConfigDict(frozen=True)

    messages: list[ChatMessage] = Field(description="The history that is kept, oldest first.")
    dropped_messages: int = Field(default=0, description="How many messages were dropped.")
    dropped_bytes: int = Field(default=0, description="Their JSON size in bytes.")
    kept_bytes: int = Field(default=0, description="JSON size of the kept messages.")

    @property
    def trimmed(self) -> bool:
        """Whether anything was dropped."""
        return self.dropped_messages > 0


def message_bytes(message: ChatMessage) -> int:
    """The size a message takes in memory accounting: its JSON form in UTF-8 bytes."""
    return len(message.model_dump_json().encode())


def trim_history(
    messages: Sequence[ChatMessage],
    max_messages: int,
    max_bytes: int,
    size: Callable[[ChatMessage], int] = message_bytes,
) -> TrimResult:
    """Drop the oldest messages until at most `max_messages` and `max_bytes` remain
    (`size` gives a message's `message_bytes`, remembered or not)."""
    sizes = [size(m) for m in messages]
    total = sum(sizes)
    start = 0
    while start < len(messages) and (len(messages) - start > max_messages or total > max_bytes):
        total -= sizes[start]
        start += 1
    if start > 0:
        while start < len(messages) and messages[start].role != "user":
            total -= sizes[start]
            start += 1
    return TrimResult(
        messages=list(messages[start:]),
        dropped_messages=start,
        dropped_bytes=sum(sizes[:start]),
        kept_bytes=total,
    )


def history_expired(updated_ms: int | None, now_ms: int, ttl_seconds: float | None) -> bool:
    """Whether a history last written at `updated_ms` has outlived `ttl_seconds` at `now_ms`."""
    if ttl_seconds is None or updated_ms is None:
        return False
    return now_ms - updated_ms >= ttl_seconds * 1000.0
