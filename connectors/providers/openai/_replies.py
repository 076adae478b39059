"""How both OpenAI wires read a reply: tool-call arguments, and the neutral response they build."""

from __future__ import annotations

import json
from typing import Any

from streamagents.connectors.providers.errors import MalformedResponse, reject_silent_empty
from streamagents.serde.chat import ChatResponse, TokenUsage
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = ["assistant_reply", "json_body", "mapping", "parse_arguments", "sequence"]


def json_body(reply: Any, provider: str) -> dict[str, Any]:
    """The reply body as a JSON object: the SDK hands back text when the content type is not
    JSON; `MalformedResponse` when it is not a JSON object."""
    body = json.loads(reply) if isinstance(reply, (str, bytes)) else reply
    if not isinstance(body, dict):
        raise MalformedResponse("the reply body is not a JSON object", provider=provider)
    return body


def mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a reply field that is absent,
    null, or of another type reads as empty)."""
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def parse_arguments(raw: str | None, name: str, provider: str) -> dict[str, Any]:
    """A tool call's JSON arguments as a dict; `MalformedResponse` when they are not one."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise MalformedResponse(
            f"the arguments of the call to {name!r} are not a JSON object", provider=provider
        )
    return value


def assistant_reply(
    text: str,
    calls: list[ToolCall],
    *,
    finish: str | None,
    usage: tuple[int | None, int | None, int | None] | None,
    model_version: str,
    latency_ms: float,
    provider: str,
    empty: str,
) -> ChatResponse:
    """The neutral response both OpenAI wires build; `empty` explains a silent empty reply."""
    reject_silent_empty(bool(text or calls), finish, provider=provider, explanation=empty)
    input_tokens, output_tokens, cached = usage or (0, 0, 0)
    return ChatResponse(
        message=ChatMessage(role="assistant", content=text, tool_calls=calls),
        usage=TokenUsage(
            input_tokens=input_tokens or 0,
            output_tokens=output_tokens or 0,
            cached_tokens=cached or 0,
        ),
        finish_reason=finish,
        model_version=model_version,
        latency_ms=latency_ms,
    )
