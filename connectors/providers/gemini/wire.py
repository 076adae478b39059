"""The Gemini wire: neutral messages to `generateContent` arguments, and the reply back.

`to_request` and `from_response` are pure (no network); `GeminiChatModel` sends the
request with the SDK and hands `from_response` the reply's JSON object.

Wire rules (see docs/providers.md): system messages become `system_instruction`; user
media become `inline_data` blobs or `file_data`; consecutive tool results become one
`user` turn with one `functionResponse` per result (`response = {"result": text}`, its
media as function-response parts, or, with `legacy_tool_media`, as sibling parts after
it); thought signatures ride on the part they came with, as bytes in its metadata.

Built-in server-side tools (`BUILTIN_TOOLS`: Google Search, URL context, code execution)
are one `tools` entry each, beside the function declarations; with both kinds on the
Gemini API the request sets `toolConfig.includeServerSideToolInvocations` (Vertex AI
refuses that field, so it is never sent there). What they did comes back as
`ChatResponse.evidence` (grounding metadata, URL-context metadata, executable code and
its result), never as message parts. A request can reference a context cache
(`GeminiRequest.referencing`): it then omits what the cache holds.
"""

from __future__ import annotations

import hashlib
import json
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
from streamagents.serde.chat import (
    ChatResponse,
    GroundingSource,
    ServerToolEvidence,
    TokenUsage,
)
from streamagents.serde.messages import (
    AGENT_DOCUMENTS,
    MEDIA_PART_CLASSES,
    ChatMessage,
    MediaPart,
    TextPart,
    ToolCall,
    decode_base64,
    media_kind_for_mime,
)

__all__ = [
    "BUILTIN_TOOLS",
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

BUILTIN_TOOLS: dict[str, types.Tool] = {
    "google_search": types.Tool(google_search=types.GoogleSearch()),
    "url_context": types.Tool(url_context=types.UrlContext()),
    "code_execution": types.Tool(code_execution=types.ToolCodeExecution()),
}
"""The built-in server-side tools by their config name, each its own `tools` entry."""

OPTION_ALIASES = {"max_tokens": "max_output_tokens", "stop": "stop_sequences"}
"""Neutral generation option names this wire renames to its own."""


@dataclass(frozen=True)
class GeminiRequest:
    """What `generate_content` is called with.

    The first `prefix_contents` contents are the agent's documents; with the system
    instruction and the tools they are what a context cache can hold."""

    contents: list[types.Content]
    config: types.GenerateContentConfig
    prefix_contents: int = 0

    def cache_config(self, ttl_s: float, display_name: str) -> types.CreateCachedContentConfig:
        """What a context cache of this request holds: system instruction, tools, documents."""
        config = self.config
        return types.CreateCachedContentConfig(
            ttl=f"{ttl_s:.3f}".rstrip("0").rstrip(".") + "s",  # a Duration: "3600s", "0.5s"
            display_name=display_name,
            contents=self.contents[: self.prefix_contents] or None,
            system_instruction=config.system_instruction,
            tools=config.tools,
            tool_config=config.tool_config,
        )

    def cache_key(self) -> str:
        """A digest of what a context cache of this request would hold: inline bytes are
        hashed as they are (no base64 and JSON of a large document on every turn), every
        other field as JSON."""
        config = self.config
        digest = hashlib.sha256()
        for content in self.contents[: self.prefix_contents]:
            digest.update(str(content.role).encode())
            for part in content.parts or []:
                blob = part.inline_data
                if blob is not None and blob.data is not None:
                    digest.update(f"inline {blob.mime_type} {len(blob.data)}\n".encode())
                    digest.update(blob.data)
                else:
                    digest.update(part.model_dump_json(exclude_none=True).encode())
        held = {
            "system": config.system_instruction,
            "tools": [t.model_dump(mode="json", exclude_none=True) for t in config.tools or []],
            "tool_config": None
            if config.tool_config is None
            else config.tool_config.model_dump(mode="json", exclude_none=True),
        }
        digest.update(json.dumps(held, sort_keys=True).encode())
        return digest.hexdigest()

    @property
    def cacheable(self) -> bool:
        """Whether there is anything a cache could hold."""
        config = self.config
        return bool(self.prefix_contents or config.system_instruction or config.tools)

    def referencing(self, cache_name: str) -> GeminiRequest:
        """The same request with what the cache holds left out and the cache named instead
        (the API refuses a request that sets both)."""
        config = self.config.model_copy(
            update={
                "system_instruction": None,
                "tools": None,
                "tool_config": None,
                "cached_content": cache_name,
            }
        )
        return GeminiRequest(contents=self.contents[self.prefix_contents :], config=config)


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
    system: list[str],
    tools: Sequence[ToolLike],
    options: Mapping[str, Any],
    builtin_tools: Sequence[str],
    vertexai: bool,
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
    entries = [types.Tool(function_declarations=declarations)] if declarations else []
    entries.extend(BUILTIN_TOOLS[name] for name in builtin_tools)
    combined = bool(declarations) and bool(builtin_tools)
    return types.GenerateContentConfig(
        system_instruction="\n\n".join(system) if system else None,
        tools=entries or None,
        tool_config=types.ToolConfig(include_server_side_tool_invocations=True)
        if combined and not vertexai
        else None,
        **settings,
    )


def to_request(
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike] = (),
    options: Mapping[str, Any] | None = None,
    *,
    store: MediaStore | None = None,
    legacy_tool_media: bool = False,
    builtin_tools: Sequence[str] = (),
    vertexai: bool = False,
) -> GeminiRequest:
    """Build the `generate_content` arguments; raises before anything is sent.

    `builtin_tools` names entries of `BUILTIN_TOOLS` to enable; `vertexai` says which
    backend the request is for (it decides whether the combination flag is sent)."""
    unknown = [name for name in builtin_tools if name not in BUILTIN_TOOLS]
    if unknown:
        raise ValueError(
            f"unknown built-in tool(s) {', '.join(unknown)}; known: {', '.join(BUILTIN_TOOLS)}"
        )
    prepared = prepare_messages(messages, store)
    synthetic = {
        call.id for m in prepared for call in m.tool_calls if call.metadata.get(SYNTHETIC_ID)
    }
    system: list[str] = []
    contents: list[types.Content] = []
    previous_role = None
    prefix = 0
    for message in prepared:
        if message.metadata.get(AGENT_DOCUMENTS) and len(contents) == prefix:
            prefix += 1
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
    config = _config(system, tools, options or {}, builtin_tools, vertexai)
    return GeminiRequest(contents=contents, config=config, prefix_contents=prefix)


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
        return MEDIA_PART_CLASSES[kind](mime_type=mime_type, data=data, metadata=metadata)
    url = _field(blob, "fileUri", "file_uri")
    return MEDIA_PART_CLASSES[kind](mime_type=mime_type, url=url, metadata=metadata)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(usage: Mapping[str, Any], camel: str, snake: str) -> int:
    value = _field(usage, camel, snake)
    return value if isinstance(value, int) else 0


def _text(value: Any) -> str:
    """Evidence text: any value as a string, a lone surrogate (which JSON can carry but
    UTF-8 cannot) replaced by "?"."""
    return str(value).encode("utf-8", "replace").decode("utf-8")


def _strings(value: Any) -> list[str]:
    return [_text(v) for v in value] if isinstance(value, list) else []


def _grounding(candidate: Mapping[str, Any]) -> list[ServerToolEvidence]:
    metadata = _mapping(_field(candidate, "groundingMetadata", "grounding_metadata"))
    if not metadata:
        return []
    sources = []
    chunks = _field(metadata, "groundingChunks", "grounding_chunks")
    for chunk in chunks if isinstance(chunks, list) else []:
        web = _mapping(_mapping(chunk).get("web"))
        if web.get("uri"):
            sources.append(
                GroundingSource(uri=_text(web["uri"]), title=_text(web.get("title") or ""))
            )
    queries = _strings(_field(metadata, "webSearchQueries", "web_search_queries"))
    if not (queries or sources):
        return []
    return [ServerToolEvidence(tool="google_search", queries=queries, sources=sources)]


def _url_context(candidate: Mapping[str, Any]) -> list[ServerToolEvidence]:
    metadata = _mapping(_field(candidate, "urlContextMetadata", "url_context_metadata"))
    entries = _field(metadata, "urlMetadata", "url_metadata")
    found = []
    for entry in entries if isinstance(entries, list) else []:
        entry = _mapping(entry)
        url = _field(entry, "retrievedUrl", "retrieved_url")
        status = _field(entry, "urlRetrievalStatus", "url_retrieval_status")
        if url:
            found.append(
                ServerToolEvidence(
                    tool="url_context",
                    url=_text(url),
                    status=None if status is None else _text(status),
                )
            )
    return found


def _code_runs(parts: Sequence[Any]) -> list[ServerToolEvidence]:
    """Each `executableCode` part with the `codeExecutionResult` part after it, if any."""
    runs: list[dict[str, Any]] = []
    for raw in parts:
        part = _mapping(raw)
        code = _mapping(_field(part, "executableCode", "executable_code"))
        result = _mapping(_field(part, "codeExecutionResult", "code_execution_result"))
        if code:
            runs.append({"language": code.get("language"), "code": code.get("code")})
        elif result:
            if not runs or "outcome" in runs[-1]:
                runs.append({})
            runs[-1].update(outcome=result.get("outcome"), output=result.get("output"))
    return [
        ServerToolEvidence(
            tool="code_execution", **{k: None if v is None else _text(v) for k, v in run.items()}
        )
        for run in runs
    ]


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
            cached_tokens=_count(usage, "cachedContentTokenCount", "cached_content_token_count"),
        ),
        finish_reason=None if finish is None else str(finish),
        model_version=_field(response, "modelVersion", "model_version") or model,
        latency_ms=latency_ms,
        evidence=[]
        if candidate is None
        else [*_grounding(candidate), *_url_context(candidate), *_code_runs(reply_parts)],
    )
