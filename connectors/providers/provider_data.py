"""Provider-specific data on messages, and a history made fit for a model that did not make it.

A reply can carry data only the model that made it can use: Gemini thought signatures
(on parts and tool calls), an Interactions reply's thoughts and stored interaction id, a
Responses tool call's item id. A failover chain marks each reply with its maker
(`MADE_BY`); `for_model` gives a copy of a history in which the replies of other makers
carry none of that data, while the history itself (the key's memory) keeps it for when
its maker answers again.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = [
    "FOREIGN_CALL_SIGNATURE",
    "INTERACTION_ID",
    "MADE_BY",
    "MESSAGE_KEYS",
    "PART_KEYS",
    "for_model",
    "made_by",
]

MADE_BY = "made_by"
"""Metadata key of an assistant message: the `provider/model` of a chain that made it."""
INTERACTION_ID = "interaction_id"
"""Message metadata key of the stored interaction an Interactions reply came from."""
MESSAGE_KEYS = ("thoughts", INTERACTION_ID)
"""Message metadata only its maker can use (the Interactions wire's THOUGHTS, INTERACTION_ID)."""
PART_KEYS = ("thought_signature", "item_id")
"""Part and tool-call metadata only its maker can use (Gemini's THOUGHT_SIGNATURE, the
Responses wire's ITEM_ID)."""
FOREIGN_CALL_SIGNATURE = base64.urlsafe_b64decode("skip_thought_signature_validator")
"""The signature the Gemini API documents for a function call no Gemini model made (its
bytes: the wire sends them as that text), so Gemini 3's signature check lets it pass."""


def made_by(message: ChatMessage, default: str) -> str:
    """The `provider/model` that made an assistant message (`default`: the chain's first,
    which made every reply of a history from before the chain marked them)."""
    maker = message.metadata.get(MADE_BY)
    return maker if isinstance(maker, str) else default


def for_model(
    messages: Sequence[ChatMessage], model: str, provider: str, default_maker: str
) -> list[ChatMessage]:
    """`messages` as `model` (`provider/model`) may be sent them: the assistant messages
    other models made lose their provider-specific data; tool calls they made get the
    foreign-call signature when `provider` is `gemini`."""
    return [
        _foreign(m, provider == "gemini")
        if m.role == "assistant" and made_by(m, default_maker) != model
        else m
        for m in messages
    ]


def _without(metadata: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """A copy of `metadata` without `keys`."""
    return {k: v for k, v in metadata.items() if k not in keys}


def _foreign(message: ChatMessage, sign_calls: bool) -> ChatMessage:
    """A message another model made, without the data only that model can use."""
    calls = [_foreign_call(c, sign_calls) for c in message.tool_calls]
    parts = [
        p.model_copy(update={"metadata": _without(p.metadata, PART_KEYS)}) for p in message.parts
    ]
    return message.model_copy(
        update={
            "metadata": _without(message.metadata, MESSAGE_KEYS),
            "parts": parts,
            "tool_calls": calls,
        }
    )


def _foreign_call(call: ToolCall, sign: bool) -> ToolCall:
    """A tool call another model made, without its maker's data (`sign`: with the
    foreign-call signature)."""
    metadata = _without(call.metadata, PART_KEYS)
    if sign:
        metadata["thought_signature"] = FOREIGN_CALL_SIGNATURE
    return call.model_copy(update={"metadata": metadata})
