"""The Responses wire: neutral messages to `responses.create` input items, and the reply back.

`to_request` and `from_response` are pure (no network); `OpenAIResponsesModel` sends them.

A tool result becomes a `function_call_output` item whose `output` is a plain string
when the result is text only, and otherwise a list in part order: `input_text`,
`input_image` (data URL or URL) and `input_file` (`file_data` with `filename`, or
`file_url`); media uploaded to the Files API (`files`) are `input_image`/`input_file` with
their `file_id`. The API has no item for audio or video there (nor in user messages): those
raise `UnsupportedContent` naming the part kind. System messages become `instructions`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers.errors import ServerError, UnsupportedContent
from streamagents.connectors.providers.media_encoding import data_url, filename_for
from streamagents.connectors.providers.neutral_request import (
    MessageLike,
    ToolLike,
    UploadedMedia,
    prepare_messages,
    prepare_tools,
    wire_options,
)
from streamagents.connectors.providers.openai._replies import (
    assistant_reply,
    json_body,
    mapping,
    parse_arguments,
    sequence,
)
from streamagents.serde.chat import ChatResponse
from streamagents.serde.messages import ChatMessage, MediaPart, TextPart, ToolCall
from streamagents.serde.safe_text import scrub

__all__ = [
    "ITEM_ID",
    "OPTION_ALIASES",
    "PROVIDER",
    "cannot_carry",
    "from_response",
    "references_file",
    "to_request",
]

PROVIDER = "openai-responses"
ITEM_ID = "item_id"
"""Metadata key of a tool call's output item id (`fc_...`), kept for reference."""
OPTION_ALIASES = {"max_tokens": "max_output_tokens"}
"""Neutral generation option names this wire renames to its own."""


def cannot_carry(part: MediaPart) -> str | None:
    """Why the Responses API cannot take `part` (as input or tool output), or None."""
    if part.kind in ("image", "document"):
        return None
    return f"the Responses API has no input item for {part.kind} ({part.mime_type})"


def references_file(part: MediaPart) -> bool:
    """Whether the wire can send `part` by `file_id` (images and documents; not a URL)."""
    return part.kind in ("image", "document") and part.url is None


def _media_item(part: MediaPart | UploadedMedia, where: str) -> dict[str, Any]:
    if isinstance(part, UploadedMedia):
        if part.kind == "image":
            return {"type": "input_image", "file_id": part.reference, "detail": "auto"}
        return {"type": "input_file", "file_id": part.reference}
    reason = cannot_carry(part)
    if reason is not None:
        raise UnsupportedContent(
            f"{reason} ({where}); use the Gemini wire for {part.kind}", provider=PROVIDER
        )
    if part.kind == "image":
        return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
    if part.url is not None:
        return {"type": "input_file", "file_url": part.url}
    return {"type": "input_file", "filename": filename_for(part), "file_data": data_url(part)}


def _content(message: ChatMessage, where: str) -> list[dict[str, Any]]:
    return [
        {"type": "input_text", "text": p.text} if isinstance(p, TextPart) else _media_item(p, where)
        for p in message.parts
    ]


def _items(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "user":
        if not message.has_media:
            return [{"role": "user", "content": message.content}]
        return [{"role": "user", "content": _content(message, "in a user message")}]
    if message.role == "assistant":
        items: list[dict[str, Any]] = []
        if message.content:
            items.append({"role": "assistant", "content": message.content})
        items.extend(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
            }
            for call in message.tool_calls
        )
        return items
    output: str | list[dict[str, Any]] = (
        _content(message, f"in the result of tool call {message.tool_call_id}")
        if message.has_media
        else message.content
    )
    return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]


def to_request(
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike] = (),
    options: Mapping[str, Any] | None = None,
    *,
    store: MediaStore | None = None,
    files: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The `responses.create` keyword arguments (model excluded); raises before sending.

    `files` maps the sha256 of media uploaded to the Files API to their file ids."""
    prepared = prepare_messages(messages, store, files=files)
    instructions = [m.content for m in prepared if m.role == "system"]
    request: dict[str, Any] = {
        "input": [item for m in prepared if m.role != "system" for item in _items(m)]
    }
    if instructions:
        request["instructions"] = "\n\n".join(instructions)
    specs = prepare_tools(tools)
    if specs:
        request["tools"] = [
            {
                "type": "function",
                "name": s.name,
                "description": s.description,
                "parameters": s.parameters,
                "strict": False,
            }
            for s in specs
        ]
    request.update(wire_options(options, OPTION_ALIASES))
    return request


def from_response(response: Any, *, model: str, latency_ms: float = 0.0) -> ChatResponse:
    """The neutral response from the reply's JSON (a dict, or its text); raises
    `EmptyResponseError` for the silent empty reply."""
    body = json_body(response, PROVIDER)
    error = body.get("error")
    if error is not None:
        detail = mapping(error)
        code = detail.get("code")
        raise ServerError(
            scrub(str(detail.get("message") or "the response failed")),
            provider=PROVIDER,
            code=None if code is None else str(code),
        )
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in map(mapping, sequence(body.get("output"))):
        if item.get("type") == "message":
            for piece in map(mapping, sequence(item.get("content"))):
                text = piece.get("text") or piece.get("refusal")
                if text:
                    texts.append(str(text))
        elif item.get("type") == "function_call":
            name = str(item.get("name") or "")
            item_id = item.get("id")
            calls.append(
                ToolCall(
                    id=str(item.get("call_id") or ""),
                    name=name,
                    arguments=parse_arguments(item.get("arguments"), name, PROVIDER),
                    metadata={ITEM_ID: item_id} if item_id else {},
                )
            )
    finish = mapping(body.get("incomplete_details")).get("reason") or body.get("status")
    usage = body.get("usage")
    return assistant_reply(
        "".join(texts),
        calls,
        finish=finish,
        usage=(
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            mapping(usage.get("input_tokens_details")).get("cached_tokens"),
        )
        if isinstance(usage, dict)
        else None,
        model_version=body.get("model") or model,
        latency_ms=latency_ms,
        provider=PROVIDER,
        empty="the reply had no output and no status",
    )
