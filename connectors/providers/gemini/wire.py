"""The Gemini wire: neutral messages to `generateContent` arguments, and the reply back.

`to_request` and `from_response` are pure (no network); `GeminiChatModel` sends the
request with the SDK.

Wire rules (see docs/providers.md): system messages become `system_instruction`; user
media become `inline_data` blobs or `file_data`; consecutive tool results become one
`user` turn with one `functionResponse` per result (`response = {"result": text}`, its
media as function-response parts, or, with `legacy_tool_media`, as sibling parts after
it); thought signatures ride on the part they came with, as bytes in its metadata.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.genai import types

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers._errors import UnsupportedContent, reject_silent_empty
from streamagents.connectors.providers._neutral_request import (
    MessageLike,
    ToolLike,
    inline_bytes,
    prepare_messages,
    prepare_tools,
    wire_options,
)
from streamagents.serde.chat import ChatResponse, TokenUsage
from streamagents.serde.messages import (
    AudioPart,
    ChatMessage,
    DocumentPart,
    ImagePart,
    MediaPart,
    TextPart,
    ToolCall,
    VideoPart,
    media_kind_for_mime,
)

__all__ = [
    "OPTION_ALIASES",
    "PROVIDER",
    "SYNTHETIC_ID",
    "THOUGHT_SIGNATURE",
    "GeminiRequest",
    "from_response",
    "to_request",
]

PROVIDER = "gemini"
THOUGHT_SIGNATURE = "thought_signature"
"""Metadata key of a part's or tool call's thought signature (bytes), echoed unchanged."""
SYNTHETIC_ID = "synthetic_id"
"""Metadata flag on a tool call whose id we made up because the reply had none; such ids
are not sent back (neither on the call nor on its function response)."""

OPTION_ALIASES = {"max_tokens": "max_output_tokens", "stop": "stop_sequences"}
"""Neutral generation option names this wire renames to its own."""
_MEDIA_CLASSES: dict[str, type[MediaPart]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "video": VideoPart,
    "document": DocumentPart,
}


@dataclass(frozen=True)
class GeminiRequest:
    """What `generate_content` is called with."""

    contents: list[types.Content]
    config: types.GenerateContentConfig


def _signature(metadata: Mapping[str, Any]) -> bytes | None:
    value = metadata.get(THOUGHT_SIGNATURE)
    return value if isinstance(value, bytes) else None


def _media_part(part: MediaPart) -> types.Part:
    if part.url is not None:
        return types.Part(file_data=types.FileData(file_uri=part.url, mime_type=part.mime_type))
    return types.Part(inline_data=types.Blob(mime_type=part.mime_type, data=inline_bytes(part)))


def _function_response_part(part: MediaPart) -> types.FunctionResponsePart:
    if part.url is not None:
        return types.FunctionResponsePart(
            file_data=types.FunctionResponseFileData(file_uri=part.url, mime_type=part.mime_type)
        )
    return types.FunctionResponsePart(
        inline_data=types.FunctionResponseBlob(mime_type=part.mime_type, data=inline_bytes(part))
    )


def _text_part(part: TextPart) -> types.Part:
    return types.Part(text=part.text, thought_signature=_signature(part.metadata))


def _user_parts(message: ChatMessage) -> list[types.Part]:
    if not message.parts:
        return [types.Part(text=message.content)]
    return [_text_part(p) if isinstance(p, TextPart) else _media_part(p) for p in message.parts]


def _model_parts(message: ChatMessage, synthetic: set[str]) -> list[types.Part]:
    parts = [_text_part(p) for p in message.text_parts()]
    for call in message.tool_calls:
        function_call = types.FunctionCall(
            id=None if call.id in synthetic else call.id, name=call.name, args=call.arguments
        )
        parts.append(
            types.Part(function_call=function_call, thought_signature=_signature(call.metadata))
        )
    return parts


def _tool_result_parts(
    message: ChatMessage, synthetic: set[str], legacy_tool_media: bool
) -> list[types.Part]:
    media = message.media
    response = types.FunctionResponse(
        id=None if message.tool_call_id in synthetic else message.tool_call_id,
        name=message.name or "",
        response={"result": message.content},
        parts=None
        if legacy_tool_media or not media
        else [_function_response_part(p) for p in media],
    )
    parts = [types.Part(function_response=response)]
    if legacy_tool_media:
        parts.extend(_media_part(p) for p in media)
    return parts


def _config(
    system: list[str], tools: Sequence[ToolLike], options: Mapping[str, Any]
) -> types.GenerateContentConfig:
    settings = wire_options(options, OPTION_ALIASES)
    if isinstance(settings.get("stop_sequences"), str):
        settings["stop_sequences"] = [settings["stop_sequences"]]
    specs = prepare_tools(tools)
    declarations = [
        types.FunctionDeclaration(
            name=s.name, description=s.description, parameters_json_schema=s.parameters
        )
        for s in specs
    ]
    return types.GenerateContentConfig(
        system_instruction="\n\n".join(system) if system else None,
        tools=[types.Tool(function_declarations=declarations)] if declarations else None,
        **settings,
    )


def to_request(
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike] = (),
    options: Mapping[str, Any] | None = None,
    *,
    store: MediaStore | None = None,
    legacy_tool_media: bool = False,
) -> GeminiRequest:
    """Build the `generate_content` arguments; raises before anything is sent."""
    prepared = prepare_messages(messages, store)
    synthetic = {
        call.id for m in prepared for call in m.tool_calls if call.metadata.get(SYNTHETIC_ID)
    }
    system: list[str] = []
    contents: list[types.Content] = []
    previous_role = None
    for message in prepared:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            contents.append(types.Content(role="user", parts=_user_parts(message)))
        elif message.role == "assistant":
            parts = _model_parts(message, synthetic)
            if parts:  # an empty reply (e.g. cut off by MAX_TOKENS) has nothing to send back
                contents.append(types.Content(role="model", parts=parts))
        else:
            parts = _tool_result_parts(message, synthetic, legacy_tool_media)
            if previous_role == "tool":
                contents[-1].parts = [*(contents[-1].parts or []), *parts]
            else:
                contents.append(types.Content(role="user", parts=parts))
        previous_role = message.role
    return GeminiRequest(contents=contents, config=_config(system, tools, options or {}))


def _reply_part(part: types.Part, index: int) -> TextPart | MediaPart | ToolCall | None:
    signature = part.thought_signature
    metadata: dict[str, Any] = {THOUGHT_SIGNATURE: signature} if signature else {}
    if part.function_call is not None:
        call = part.function_call
        if not call.id:
            metadata[SYNTHETIC_ID] = True
        return ToolCall(
            id=call.id or f"gemini-{uuid.uuid4().hex[:12]}-{index}",
            name=call.name or "",
            arguments=dict(call.args or {}),
            metadata=metadata,
        )
    if part.thought:
        return None
    if part.text is not None:
        return TextPart(text=part.text, metadata=metadata)
    blob = part.inline_data or part.file_data
    if blob is None:
        return None
    mime_type = blob.mime_type or ""
    kind = media_kind_for_mime(mime_type)
    if kind is None:
        raise UnsupportedContent(
            f"the reply holds media of type {mime_type!r}, which fits no message part kind",
            provider=PROVIDER,
        )
    if isinstance(blob, types.Blob):
        return _MEDIA_CLASSES[kind](mime_type=mime_type, data=blob.data, metadata=metadata)
    return _MEDIA_CLASSES[kind](mime_type=mime_type, url=blob.file_uri, metadata=metadata)


def from_response(
    response: types.GenerateContentResponse, *, model: str, latency_ms: float = 0.0
) -> ChatResponse:
    """The neutral response; raises `EmptyResponseError` for the silent empty reply."""
    candidate = response.candidates[0] if response.candidates else None
    reply_parts = (candidate.content.parts if candidate and candidate.content else None) or []
    finish = candidate.finish_reason if candidate else None
    if finish is None and response.prompt_feedback is not None:
        finish = response.prompt_feedback.block_reason
    reject_silent_empty(
        bool(reply_parts),
        finish,
        provider=PROVIDER,
        explanation="the reply had no candidates or content and no finish reason",
    )
    parts: list[TextPart | MediaPart] = []
    calls: list[ToolCall] = []
    for index, raw in enumerate(reply_parts):
        converted = _reply_part(raw, index)
        if isinstance(converted, ToolCall):
            calls.append(converted)
        elif converted is not None:
            parts.append(converted)
    usage = response.usage_metadata
    return ChatResponse(
        message=ChatMessage(role="assistant", parts=parts, tool_calls=calls),
        usage=TokenUsage(
            input_tokens=(usage.prompt_token_count or 0) if usage else 0,
            output_tokens=(
                (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
                if usage
                else 0
            ),
        ),
        finish_reason=None if finish is None else str(getattr(finish, "value", finish)),
        model_version=response.model_version or model,
        latency_ms=latency_ms,
    )
