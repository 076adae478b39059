"""The Chat Completions wire: neutral messages to `chat.completions.create`, and the reply back.

`to_request` and `from_response` are pure (no network); `OpenAIChatModel` sends the request.

Tool messages on this wire carry text only (the API refuses anything else), so a tool
result with media is sent in two pieces: the tool message holds its text (or a one-line
note naming the attachments), and after the run of tool messages one `user` message
carries the media, each preceded by a text part naming the tool call it came from.
User media: images as `image_url` (URL or data URL), audio as `input_audio` (inline wav
or mp3), PDF documents as `file` (inline, or by `file_id` when uploaded to the Files API:
`references_file`, `files`). Anything else raises `UnsupportedContent`. Chat Completions
refers to no uploaded image or audio: those stay inline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers.errors import UnsupportedContent
from streamagents.connectors.providers.media_encoding import b64, data_url, filename_for
from streamagents.connectors.providers.neutral_request import (
    MessageLike,
    ToolLike,
    UploadedMedia,
    inline_bytes,
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

__all__ = [
    "OPTION_ALIASES",
    "PROVIDER",
    "cannot_carry",
    "from_response",
    "references_file",
    "to_request",
]

PROVIDER = "openai"
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
OPTION_ALIASES = {"max_tokens": "max_completion_tokens"}
"""Neutral generation option names this wire renames to its own."""


def _essence(mime_type: str) -> str:
    return mime_type.split(";", 1)[0].strip()


def cannot_carry(part: MediaPart) -> str | None:
    """Why Chat Completions cannot take `part` in a user message, or None when it can."""
    mime = _essence(part.mime_type)
    if part.kind == "image":
        return None
    if part.kind == "audio":
        if mime not in _AUDIO_FORMATS:
            return f"Chat Completions takes audio as wav or mp3 only, not {mime}"
        if part.url is not None:
            return "Chat Completions takes audio inline only (input_audio), not by URL"
        return None
    if part.kind == "document":
        if mime != "application/pdf":
            return f"Chat Completions takes PDF documents only, not {mime}"
        if part.url is not None:
            return "Chat Completions takes PDF documents inline only (file), not by URL"
        return None
    return f"Chat Completions has no content part for {part.kind} ({mime})"


def references_file(part: MediaPart) -> bool:
    """Whether the wire can send `part` by `file_id`: PDF documents only (`image_url` takes a
    URL or a data URL, `input_audio` inline data)."""
    return (
        part.kind == "document"
        and _essence(part.mime_type) == "application/pdf"
        and (part.url is None)
    )


def _media_part(part: MediaPart | UploadedMedia, where: str) -> dict[str, Any]:
    if isinstance(part, UploadedMedia):  # made only of parts `references_file` accepted
        return {"type": "file", "file": {"file_id": part.reference}}
    reason = cannot_carry(part)
    if reason is not None:
        raise UnsupportedContent(
            f"{reason} ({where}); use the Gemini or Responses wire for it", provider=PROVIDER
        )
    if part.kind == "image":
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    if part.kind == "audio":
        audio_format = _AUDIO_FORMATS[_essence(part.mime_type)]
        data = b64(inline_bytes(part) or b"")
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    return {"type": "file", "file": {"filename": filename_for(part), "file_data": data_url(part)}}


def _user_message(message: ChatMessage) -> dict[str, Any]:
    if not message.has_media:
        return {"role": "user", "content": message.content}
    content = [
        {"type": "text", "text": p.text}
        if isinstance(p, TextPart)
        else _media_part(p, "in a user message")
        for p in message.parts
    ]
    return {"role": "user", "content": content}


def _assistant_message(message: ChatMessage) -> dict[str, Any]:
    encoded: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        encoded["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    elif encoded["content"] is None:
        encoded["content"] = ""
    return encoded


def _tool_message(message: ChatMessage) -> dict[str, Any]:
    text = message.content
    if not text and message.has_media:
        kinds = ", ".join(p.mime_type for p in message.media)
        text = f"[{len(message.media)} attachment(s): {kinds}; sent in the next user message]"
    return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}


def _attachments(results: list[ChatMessage]) -> list[dict[str, Any]]:
    """The user message carrying a run of tool results' media (none when they have none)."""
    content: list[dict[str, Any]] = []
    for result in results:
        media = result.media
        for number, part in enumerate(media, start=1):
            content.append(
                {
                    "type": "text",
                    "text": f"Attachment {number} of {len(media)} from tool call "
                    f"{result.tool_call_id} ({result.name or 'tool'}):",
                }
            )
            content.append(_media_part(part, f"returned by tool call {result.tool_call_id}"))
    return [{"role": "user", "content": content}] if content else []


def _tool_spec(spec: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def to_request(
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike] = (),
    options: Mapping[str, Any] | None = None,
    *,
    store: MediaStore | None = None,
    files: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The `chat.completions.create` keyword arguments (model excluded); raises before sending.

    `files` maps the sha256 of PDFs uploaded to the Files API to their file ids."""
    encoded: list[dict[str, Any]] = []
    run: list[ChatMessage] = []  # the current run of consecutive tool results
    for message in prepare_messages(messages, store, files=files):
        if message.role == "tool":
            encoded.append(_tool_message(message))
            run.append(message)
            continue
        encoded.extend(_attachments(run))
        run = []
        if message.role == "system":
            encoded.append({"role": "system", "content": message.content})
        elif message.role == "user":
            encoded.append(_user_message(message))
        else:
            encoded.append(_assistant_message(message))
    encoded.extend(_attachments(run))
    request: dict[str, Any] = {"messages": encoded}
    specs = prepare_tools(tools)
    if specs:
        request["tools"] = [_tool_spec(s) for s in specs]
    request.update(wire_options(options, OPTION_ALIASES))
    return request


def from_response(completion: Any, *, model: str, latency_ms: float = 0.0) -> ChatResponse:
    """The neutral response from the reply's JSON (a dict, or its text); raises
    `EmptyResponseError` for the silent empty reply."""
    body = json_body(completion, PROVIDER)
    choices = sequence(body.get("choices"))
    choice = mapping(choices[0]) if choices else None
    message = mapping(choice.get("message")) if choice is not None else {}
    text = message.get("content") or message.get("refusal") or ""
    calls = []
    for call in sequence(message.get("tool_calls")):
        function = mapping(call).get("function")
        if isinstance(function, dict):
            name = str(function.get("name") or "")
            arguments = parse_arguments(function.get("arguments"), name, PROVIDER)
            calls.append(ToolCall(id=str(call.get("id") or ""), name=name, arguments=arguments))
    usage = body.get("usage")
    return assistant_reply(
        str(text),
        calls,
        finish=choice.get("finish_reason") if choice is not None else None,
        usage=(
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            mapping(usage.get("prompt_tokens_details")).get("cached_tokens"),
        )
        if isinstance(usage, dict)
        else None,
        model_version=body.get("model") or model,
        latency_ms=latency_ms,
        provider=PROVIDER,
        empty="the reply had no choices or content and no finish reason",
    )
