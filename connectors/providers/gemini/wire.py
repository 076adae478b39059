"""The Gemini wire: neutral messages to `generateContent` arguments, and the reply back.

`to_request` and `from_response` are pure (no network); `GeminiChatModel` sends the
request with the SDK and hands `from_response` the reply's JSON object.

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
from streamagents.connectors.providers._errors import (
    MalformedResponse,
    UnsupportedContent,
    reject_silent_empty,
)
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
    decode_base64,
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


def _part_metadata(part: Mapping[str, Any]) -> dict[str, Any]:
    signature = part.get("thoughtSignature") or part.get("thought_signature")
    if isinstance(signature, str) and signature:
        return {THOUGHT_SIGNATURE: decode_base64(signature, "thoughtSignature")}
    return {}


def _field(value: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A reply field under its JSON name (camelCase) or the snake_case one servers may use."""
    found = value.get(camel)
    return value.get(snake) if found is None else found


def _reply_part(part: Mapping[str, Any], index: int) -> TextPart | MediaPart | ToolCall | None:
    metadata = _part_metadata(part)
    call = _mapping(_field(part, "functionCall", "function_call"))
    if call:
        if not call.get("id"):
            metadata[SYNTHETIC_ID] = True
        return ToolCall(
            id=call.get("id") or f"gemini-{uuid.uuid4().hex[:12]}-{index}",
            name=call.get("name") or "",
            arguments=dict(_mapping(call.get("args"))),
            metadata=metadata,
        )
    if part.get("thought"):
        return None
    text = part.get("text")
    if text is not None:
        return TextPart(text=str(text), metadata=metadata)
    inline = _mapping(_field(part, "inlineData", "inline_data"))
    blob = inline or _mapping(_field(part, "fileData", "file_data"))
    if not blob:
        return None
    mime_type = str(_field(blob, "mimeType", "mime_type") or "")
    kind = media_kind_for_mime(mime_type)
    if kind is None:
        raise UnsupportedContent(
            f"the reply holds media of type {mime_type!r}, which fits no message part kind",
            provider=PROVIDER,
        )
    if inline:
        data = decode_base64(str(inline.get("data") or ""), "inlineData.data")
        return _MEDIA_CLASSES[kind](mime_type=mime_type, data=data, metadata=metadata)
    url = _field(blob, "fileUri", "file_uri")
    return _MEDIA_CLASSES[kind](mime_type=mime_type, url=url, metadata=metadata)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(usage: Mapping[str, Any], camel: str, snake: str) -> int:
    value = _field(usage, camel, snake)
    return value if isinstance(value, int) else 0


def from_response(response: Any, *, model: str, latency_ms: float = 0.0) -> ChatResponse:
    """The neutral response from the reply's JSON object, read once; raises
    `EmptyResponseError` for the silent empty reply, `MalformedResponse` for a body that
    is not a JSON object."""
    if not isinstance(response, dict):
        raise MalformedResponse("the reply body is not a JSON object", provider=PROVIDER)
    candidates = response.get("candidates")
    candidate = _mapping(candidates[0]) if isinstance(candidates, list) and candidates else None
    content = _mapping(candidate.get("content")) if candidate is not None else {}
    reply_parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    finish = _field(candidate, "finishReason", "finish_reason") if candidate else None
    if finish is None:
        feedback = _mapping(_field(response, "promptFeedback", "prompt_feedback"))
        finish = _field(feedback, "blockReason", "block_reason")
    reject_silent_empty(
        bool(reply_parts),
        finish,
        provider=PROVIDER,
        explanation="the reply had no candidates or content and no finish reason",
    )
    parts: list[TextPart | MediaPart] = []
    calls: list[ToolCall] = []
    for index, raw in enumerate(reply_parts):
        converted = _reply_part(_mapping(raw), index)
        if isinstance(converted, ToolCall):
            calls.append(converted)
        elif converted is not None:
            parts.append(converted)
    usage = _mapping(_field(response, "usageMetadata", "usage_metadata"))
    return ChatResponse(
        message=ChatMessage(role="assistant", parts=parts, tool_calls=calls),
        usage=TokenUsage(
            input_tokens=_count(usage, "promptTokenCount", "prompt_token_count"),
            output_tokens=_count(usage, "candidatesTokenCount", "candidates_token_count")
            + _count(usage, "thoughtsTokenCount", "thoughts_token_count"),
            cached_input_tokens=_count(
                usage, "cachedContentTokenCount", "cached_content_token_count"
            ),
        ),
        finish_reason=None if finish is None else str(finish),
        model_version=_field(response, "modelVersion", "model_version") or model,
        latency_ms=latency_ms,
    )
