"""The Gemini wire: neutral messages to the `generateContent` REST JSON, and the reply back.

`to_request` and `from_response` are pure (no network); `GeminiChatModel` sends the
request through the SDK's request layer and hands `from_response` the reply's JSON object.
The request is built as plain dicts under the REST field names, not as google-genai's
typed objects: those validate every field on construction and the SDK's converters walk
them again, which cost about as much Python per call as everything else on a turn.

Wire rules (see docs/providers.md): system messages become `systemInstruction` (one
user-role content, as the SDK sends a string); user media become `inlineData` blobs or
`fileData` (a URL, or a file uploaded by `upload_media`: `references_file`, `files`);
consecutive tool results become one `user` turn with one `functionResponse` per result
(`response = {"result": text}`, its media as function-response parts, or, with
`legacy_tool_media`, as sibling parts after it); thought signatures ride on the part they
came with, as bytes in its metadata. Bytes are sent as URL-safe base64, as the SDK sends
them. Generation options with a plain rule (`temperature`, `max_output_tokens`, ...) go
into `generationConfig` as they are; any other option goes through the SDK's typed config
and converter, so it is validated and placed exactly as the SDK would.

Built-in server-side tools (`BUILTIN_TOOLS`: Google Search, URL context, code execution)
are one `tools` entry each, before the function declarations; with both kinds on the
Gemini API the request sets `toolConfig.includeServerSideToolInvocations` (Vertex AI
refuses that field, so it is never sent there). What they did comes back as
`ChatResponse.evidence` (grounding metadata, URL-context metadata, executable code and
its result), never as message parts. A request can reference a context cache
(`GeminiRequest.referencing`): it then omits what the cache holds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from google.genai import types

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers.errors import (
    MalformedResponse,
    UnsupportedContent,
    reject_silent_empty,
)
from streamagents.connectors.providers.neutral_request import (
    MessageLike,
    ToolLike,
    UploadedMedia,
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
    "references_file",
    "to_request",
]

PROVIDER = "gemini"
THOUGHT_SIGNATURE = "thought_signature"
"""Metadata key of a part's or tool call's thought signature (bytes), echoed unchanged."""
SYNTHETIC_ID = "synthetic_id"
"""Metadata flag on a tool call whose id we made up because the reply had none; such ids
are not sent back (neither on the call nor on its function response)."""

BUILTIN_TOOLS: dict[str, dict[str, Any]] = {
    "google_search": {"googleSearch": {}},
    "url_context": {"urlContext": {}},
    "code_execution": {"codeExecution": {}},
}
"""The built-in server-side tools by their config name, each its own `tools` entry (REST JSON)."""

OPTION_ALIASES = {"max_tokens": "max_output_tokens", "stop": "stop_sequences"}
"""Neutral generation option names this wire renames to its own."""


def _is_number(value: Any) -> bool:
    """A float, or an int that converts to one exactly (others are left to the SDK)."""
    return type(value) is float or (type(value) is int and abs(value) <= 2**53)


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_labels(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


_THINKING_FIELDS = {"include_thoughts": bool, "thinking_budget": int}


def _is_plain_thinking(value: Any) -> bool:
    """A thinking config of only a budget and the thoughts flag, under the names the SDK
    sends (it copies this object as it is, snake_case keys and all)."""
    return isinstance(value, dict) and all(
        type(v) is _THINKING_FIELDS.get(k) for k, v in value.items()
    )


_GENERATION_FIELDS: dict[str, tuple[str, Callable[[Any], bool], Callable[[Any], Any]]] = {
    "temperature": ("temperature", _is_number, float),
    "top_p": ("topP", _is_number, float),
    "top_k": ("topK", _is_number, float),
    "presence_penalty": ("presencePenalty", _is_number, float),
    "frequency_penalty": ("frequencyPenalty", _is_number, float),
    "candidate_count": ("candidateCount", _is_int, int),
    "max_output_tokens": ("maxOutputTokens", _is_int, int),
    "seed": ("seed", _is_int, int),
    "logprobs": ("logprobs", _is_int, int),
    "response_logprobs": ("responseLogprobs", lambda v: isinstance(v, bool), bool),
    "stop_sequences": ("stopSequences", _is_strings, list),
    "response_mime_type": ("responseMimeType", lambda v: isinstance(v, str), str),
    "response_json_schema": ("responseJsonSchema", lambda v: v is not None, lambda v: v),
    "thinking_config": ("thinkingConfig", _is_plain_thinking, dict),
}
"""Generation options sent as they are, under `generationConfig`: the option, its REST
name, the check a value must pass to be sent as is, and the type it is sent as (what the
SDK's typed config would have made of it)."""

_BODY_FIELDS = {"labels": ("labels", _is_labels)}
"""Generation options that are body fields of their own, with the same kind of check."""


def _plain_options(
    settings: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], types.GenerateContentConfig | None]:
    """Split generation options into the `generationConfig` fields and body fields sent as
    they are, and the rest: every option without a plain rule here, or whose value fails
    its check, goes into the SDK's typed config (validated now, as every option used to
    be; converted by the SDK when sent)."""
    generation: dict[str, Any] = {}
    body: dict[str, Any] = {}
    typed: dict[str, Any] = {}
    for name, value in settings.items():
        rule = _GENERATION_FIELDS.get(name)
        if rule is not None and rule[1](value):
            generation[rule[0]] = rule[2](value)
            continue
        top = _BODY_FIELDS.get(name)
        if top is not None and top[1](value):
            body[top[0]] = value
            continue
        typed[name] = value
    for taken in ("system_instruction", "tools", "tool_config"):
        if taken in typed:  # the wire sets these itself
            raise TypeError(f"generation option {taken!r} is set by the wire, not an option")
    return generation, body, types.GenerateContentConfig(**typed) if typed else None


def _encoded(value: Any) -> Any:
    """Bytes as the SDK sends them: URL-safe base64 text."""
    return base64.urlsafe_b64encode(value).decode("ascii") if isinstance(value, bytes) else value


def _blob_json(blob: dict[str, Any]) -> dict[str, Any]:
    data = blob.get("data")
    return blob if data is None else {**blob, "data": _encoded(data)}


def _part_json(part: dict[str, Any]) -> dict[str, Any]:
    """A content part as sent: its inline bytes and thought signature as base64 text."""
    if "text" in part or "functionCall" in part:
        signature = part.get("thoughtSignature")
        return part if signature is None else {**part, "thoughtSignature": _encoded(signature)}
    if "inlineData" in part:
        return {**part, "inlineData": _blob_json(part["inlineData"])}
    response = part.get("functionResponse")
    if response is not None and "parts" in response:
        inner = [
            {**p, "inlineData": _blob_json(p["inlineData"])} if "inlineData" in p else p
            for p in response["parts"]
        ]
        return {**part, "functionResponse": {**response, "parts": inner}}
    return part


def _json_default(value: Any) -> str:
    if isinstance(value, bytes):
        return _encoded(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass(frozen=True)
class GeminiRequest:
    """The `generateContent` request as REST JSON, in parts: `body()` assembles it.

    Contents are REST `Content` objects whose inline data and thought signatures are still
    bytes (encoded when sent, so a cached prefix is never encoded). The first
    `prefix_contents` contents are the agent's documents; with the system instruction and
    the tools they are what a context cache can hold."""

    contents: list[dict[str, Any]]
    system_instruction: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_config: dict[str, Any] | None = None
    generation_config: dict[str, Any] = field(default_factory=dict)
    body_fields: dict[str, Any] = field(default_factory=dict)
    """Generation options that are body fields of their own (`labels`)."""
    typed_options: types.GenerateContentConfig | None = None
    """Generation options without a plain rule, for the SDK's converter at send time."""
    cached_content: str | None = None
    prefix_contents: int = 0

    def body(self) -> dict[str, Any]:
        """The request body, JSON-ready (bytes as base64 text)."""
        body: dict[str, Any] = {
            "contents": [
                {"role": c["role"], "parts": [_part_json(p) for p in c["parts"]]}
                for c in self.contents
            ],
            "generationConfig": dict(self.generation_config),
            **self.body_fields,
        }
        if self.system_instruction is not None:
            body["systemInstruction"] = self.system_instruction
        if self.tools is not None:
            body["tools"] = self.tools
        if self.tool_config is not None:
            body["toolConfig"] = self.tool_config
        if self.cached_content is not None:
            body["cachedContent"] = self.cached_content
        return body

    def cache_config(self, ttl_s: float, display_name: str) -> types.CreateCachedContentConfig:
        """What a context cache of this request holds: system instruction, tools, documents
        (the SDK's typed config, built once per cache, from the request's JSON)."""
        return types.CreateCachedContentConfig.model_validate(
            {
                "ttl": f"{ttl_s:.3f}".rstrip("0").rstrip(".") + "s",  # a Duration: "3600s"
                "display_name": display_name,
                "contents": self.contents[: self.prefix_contents] or None,
                "system_instruction": self.system_instruction,
                "tools": self.tools,
                "tool_config": self.tool_config,
            }
        )

    def cache_key(self) -> str:
        """A digest of what a context cache of this request would hold: inline bytes are
        hashed as they are (no base64 and JSON of a large document on every turn), every
        other field as JSON."""
        digest = hashlib.sha256()
        for content in self.contents[: self.prefix_contents]:
            digest.update(str(content["role"]).encode())
            for part in content["parts"]:
                blob = part.get("inlineData")
                if blob is not None and blob.get("data") is not None:
                    digest.update(f"inline {blob['mimeType']} {len(blob['data'])}\n".encode())
                    digest.update(blob["data"])
                else:
                    digest.update(json.dumps(part, sort_keys=True, default=_json_default).encode())
        held = {
            "system": self.system_instruction,
            "tools": self.tools,
            "tool_config": self.tool_config,
        }
        digest.update(json.dumps(held, sort_keys=True).encode())
        return digest.hexdigest()

    @property
    def cacheable(self) -> bool:
        """Whether there is anything a cache could hold."""
        return bool(self.prefix_contents or self.system_instruction or self.tools)

    def referencing(self, cache_name: str) -> GeminiRequest:
        """The same request with what the cache holds left out and the cache named instead
        (the API refuses a request that sets both)."""
        return replace(
            self,
            contents=self.contents[self.prefix_contents :],
            system_instruction=None,
            tools=None,
            tool_config=None,
            cached_content=cache_name,
            prefix_contents=0,
        )


def _signature(metadata: Mapping[str, Any]) -> bytes | None:
    value = metadata.get(THOUGHT_SIGNATURE)
    return value if isinstance(value, bytes) else None


def references_file(part: MediaPart) -> bool:
    """Whether the wire can send `part` as a file of the Files API (any kind; not a URL)."""
    return part.url is None


def _blob(part: MediaPart | UploadedMedia) -> dict[str, Any]:
    """A media part as REST `fileData` (a URL or an uploaded file) or `inlineData` (bytes,
    encoded when sent)."""
    if isinstance(part, UploadedMedia):
        return {"fileData": {"fileUri": part.reference, "mimeType": part.mime_type}}
    if part.url is not None:
        return {"fileData": {"fileUri": part.url, "mimeType": part.mime_type}}
    data = inline_bytes(part)
    blob = (
        {"mimeType": part.mime_type} if data is None else {"mimeType": part.mime_type, "data": data}
    )
    return {"inlineData": blob}


def _text_part(part: TextPart) -> dict[str, Any]:
    signature = _signature(part.metadata)
    if signature is None:
        return {"text": part.text}
    return {"text": part.text, "thoughtSignature": signature}


def _user_parts(message: ChatMessage) -> list[dict[str, Any]]:
    if not message.parts:
        return [{"text": message.content}]
    return [_text_part(p) if isinstance(p, TextPart) else _blob(p) for p in message.parts]


def _model_parts(message: ChatMessage, synthetic: set[str]) -> list[dict[str, Any]]:
    if message.parts:
        parts = [_text_part(p) for p in message.parts if isinstance(p, TextPart)]
    else:  # plain content: one text part, which has no metadata to carry a signature
        parts = [{"text": message.content}] if message.content else []
    for call in message.tool_calls:
        function_call: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.id not in synthetic:
            function_call["id"] = call.id
        part: dict[str, Any] = {"functionCall": function_call}
        signature = _signature(call.metadata)
        if signature is not None:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _tool_result_parts(
    message: ChatMessage, synthetic: set[str], legacy_tool_media: bool
) -> list[dict[str, Any]]:
    media = message.media
    response: dict[str, Any] = {
        "name": message.name or "",
        "response": {"result": message.content},
    }
    if message.tool_call_id is not None and message.tool_call_id not in synthetic:
        response["id"] = message.tool_call_id
    if media and not legacy_tool_media:
        response["parts"] = [_blob(p) for p in media]
    parts: list[dict[str, Any]] = [{"functionResponse": response}]
    if legacy_tool_media:
        parts.extend(_blob(p) for p in media)
    return parts


def _tools(tools: Sequence[ToolLike], builtin_tools: Sequence[str]) -> list[dict[str, Any]]:
    """The `tools` entries: each built-in tool, then one entry with every function
    declaration (the order the SDK's transform gave them)."""
    entries = [BUILTIN_TOOLS[name] for name in builtin_tools]
    declarations = [
        {"name": s.name, "description": s.description, "parametersJsonSchema": s.parameters}
        for s in prepare_tools(tools)
    ]
    if declarations:
        entries.append({"functionDeclarations": declarations})
    return entries


def to_request(
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike] = (),
    options: Mapping[str, Any] | None = None,
    *,
    store: MediaStore | None = None,
    legacy_tool_media: bool = False,
    builtin_tools: Sequence[str] = (),
    vertexai: bool = False,
    files: Mapping[str, str] | None = None,
) -> GeminiRequest:
    """Build the `generateContent` request; raises before anything is sent.

    `builtin_tools` names entries of `BUILTIN_TOOLS` to enable; `vertexai` says which
    backend the request is for (it decides whether the combination flag is sent); `files`
    maps the sha256 of media uploaded to the Files API to their file URIs."""
    unknown = [name for name in builtin_tools if name not in BUILTIN_TOOLS]
    if unknown:
        raise ValueError(
            f"unknown built-in tool(s) {', '.join(unknown)}; known: {', '.join(BUILTIN_TOOLS)}"
        )
    settings = wire_options(options, OPTION_ALIASES)
    if isinstance(settings.get("stop_sequences"), str):
        settings["stop_sequences"] = [settings["stop_sequences"]]
    generation, body_fields, typed = _plain_options(settings)
    prepared = prepare_messages(messages, store, files=files)
    synthetic = {
        call.id for m in prepared for call in m.tool_calls if call.metadata.get(SYNTHETIC_ID)
    }
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    previous_role = None
    prefix = 0
    for message in prepared:
        if message.metadata.get(AGENT_DOCUMENTS) and len(contents) == prefix:
            prefix += 1
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            contents.append({"role": "user", "parts": _user_parts(message)})
        elif message.role == "assistant":
            parts = _model_parts(message, synthetic)
            if parts:  # an empty reply (e.g. cut off by MAX_TOKENS) has nothing to send back
                contents.append({"role": "model", "parts": parts})
        else:
            parts = _tool_result_parts(message, synthetic, legacy_tool_media)
            if previous_role == "tool":
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": "user", "parts": parts})
        previous_role = message.role
    entries = _tools(tools, builtin_tools)
    combined = len(entries) > len(builtin_tools) and bool(builtin_tools)
    return GeminiRequest(
        contents=contents,
        # The SDK sends a system instruction string as one user-role content.
        system_instruction={"parts": [{"text": "\n\n".join(system)}], "role": "user"}
        if system
        else None,
        tools=entries or None,
        tool_config={"includeServerSideToolInvocations": True}
        if combined and not vertexai
        else None,
        generation_config=generation,
        body_fields=body_fields,
        typed_options=typed,
        prefix_contents=prefix,
    )


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
