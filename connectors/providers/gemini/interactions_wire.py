"""The Gemini Interactions wire: neutral messages to a `POST /v1beta/interactions` body, and back.

`to_request` and `from_response` are pure (no network); `GeminiInteractionsModel` sends
the body with the SDK's own request method. A request is a list of typed steps
(`user_input`, `model_output`, `thought`, `function_call`, `function_result`) instead of
`contents`; system messages fold into `system_instruction`.

Continuation: given the `previous_interaction_id` option, the body carries that id and
only the steps after the assistant message that came with it (its
`metadata["interaction_id"]`); without such a message the whole conversation is sent.
Thoughts of a reply are kept in its message's `metadata["thoughts"]` (signature as the
bytes of the text received, so it goes back byte for byte). Call ids are made legal for
this wire (`legal_call_id`), the same way for a call and its result.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers.errors import (
    MalformedResponse,
    ServerError,
    UnsupportedContent,
    reject_silent_empty,
)
from streamagents.connectors.providers.media_encoding import b64
from streamagents.connectors.providers.neutral_request import (
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
from streamagents.serde.safe_text import scrub

__all__ = [
    "ASSISTANT_MEDIA",
    "INTERACTION_ID",
    "OPTION_ALIASES",
    "PROVIDER",
    "THOUGHTS",
    "TOOL_RESULT_MEDIA",
    "InteractionsRequest",
    "StreamAssembler",
    "from_response",
    "legal_call_id",
    "to_request",
]

PROVIDER = "gemini-interactions"
INTERACTION_ID = "interaction_id"
"""Metadata key of an assistant message: the stored interaction it came from."""
THOUGHTS = "thoughts"
"""Metadata key of an assistant message: its thoughts, `[{"signature": bytes, "summary":
[text, ...]}]`, echoed back as `thought` steps before its other steps."""
OPTION_ALIASES = {"max_tokens": "max_output_tokens", "stop": "stop_sequences"}
"""Neutral generation option names this wire renames to its own."""
TOOL_RESULT_MEDIA = frozenset({"image"})
"""Media kinds a `function_result` carries (text and image items, as the API documents)."""
ASSISTANT_MEDIA = frozenset({"image"})
"""Media kinds an assistant message may hold: sent back as a `model_output` image item."""
_TOP_LEVEL = frozenset(
    {
        "response_format",
        "response_mime_type",
        "response_modalities",
        "safety_settings",
        "service_tier",
        "cached_content",
        "labels",
    }
)
"""Options that are fields of the body itself; every other one goes in `generation_config`."""
_TOOL_CHOICE = {"auto": "auto", "none": "none", "required": "any"}
_CALL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ILLEGAL = re.compile(r"[^A-Za-z0-9_-]")
_MEDIA_CLASSES: dict[str, type[MediaPart]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "video": VideoPart,
    "document": DocumentPart,
}
_INPUT_STEPS = frozenset({"user_input", "function_result"})


@dataclass(frozen=True)
class InteractionsRequest:
    """The JSON body to send, and the stored interaction it continues (None: all sent)."""

    body: dict[str, Any]
    continued_from: str | None


def legal_call_id(call_id: str) -> str:
    """`call_id` as this wire accepts it: 1-64 of `[A-Za-z0-9_-]`. A legal id stays as it
    is; any other is cleaned and suffixed with a digest of the original, so distinct ids
    stay distinct and a call and its result always agree."""
    if _CALL_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_ILLEGAL.sub('_', call_id)[:47]}_{digest}"


def _media_item(part: MediaPart) -> dict[str, Any]:
    item: dict[str, Any] = {"type": part.kind, "mime_type": part.mime_type}
    if part.url is not None:
        item["uri"] = part.url
    else:
        item["data"] = b64(inline_bytes(part) or b"")
    return item


def _content_item(part: TextPart | MediaPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if part.kind == "document" and part.mime_type.startswith("text/") and part.data is not None:
        text = inline_bytes(part) or b""
        return {"type": "text", "text": text.decode("utf-8", "replace")}
    return _media_item(part)


def _user_content(message: ChatMessage) -> list[dict[str, Any]]:
    if not message.parts:
        return [{"type": "text", "text": message.content}]
    return [_content_item(p) for p in message.parts]


def _json_result(text: str) -> Any:
    """The result value of a text-only tool result: a JSON object as is, another JSON
    value (not a string) as `{"result": value}`, anything else the text itself."""

    def refuse_constant(name: str) -> Any:
        raise ValueError(name)  # NaN and Infinity are not JSON

    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        return text
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return text
    return {"result": value}


def _tool_result(message: ChatMessage) -> Any:
    if not message.has_media:
        return _json_result(message.content)
    items = []
    for part in message.parts:
        if isinstance(part, TextPart):
            items.append({"type": "text", "text": part.text})
        elif part.kind in TOOL_RESULT_MEDIA:
            items.append(_media_item(part))
        else:
            raise UnsupportedContent(
                f"a function_result on the Interactions API carries text and image items "
                f"only, not {part.kind} ({part.mime_type}; in the result of tool call "
                f"{message.tool_call_id}); use the gemini wire for {part.kind} in tool results",
                provider=PROVIDER,
            )
    return items


def _thought_steps(message: ChatMessage) -> list[dict[str, Any]]:
    steps = []
    for thought in message.metadata.get(THOUGHTS) or []:
        signature = thought.get("signature") if isinstance(thought, Mapping) else None
        if not isinstance(signature, bytes) or not signature:
            continue
        step: dict[str, Any] = {"type": "thought", "signature": signature.decode("utf-8")}
        summary = [s for s in thought.get("summary") or [] if isinstance(s, str) and s]
        if summary:
            step["summary"] = [{"type": "text", "text": s} for s in summary]
        steps.append(step)
    return steps


def _assistant_steps(message: ChatMessage) -> list[dict[str, Any]]:
    steps = _thought_steps(message)
    steps.extend(
        {"type": "model_output", "content": [_content_item(part)]}
        for part in (message.parts or message.text_parts())
        if not isinstance(part, TextPart) or part.text
    )
    steps.extend(
        {
            "type": "function_call",
            "id": legal_call_id(call.id),
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in message.tool_calls
    )
    return steps


def _steps(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            content = _user_content(message)
            if steps and steps[-1]["type"] == "user_input":
                steps[-1]["content"].extend(content)
            else:
                steps.append({"type": "user_input", "content": content})
        elif message.role == "assistant":
            steps.extend(_assistant_steps(message))
        elif message.role == "tool":
            step: dict[str, Any] = {
                "type": "function_result",
                "name": message.name or "",
                "call_id": legal_call_id(message.tool_call_id or ""),
                "result": _tool_result(message),
            }
            if message.is_error:
                step["is_error"] = True
            steps.append(step)
    return steps


def _tool_choice(choice: Any, tool_names: Sequence[str]) -> Any:
    if isinstance(choice, str) and choice in _TOOL_CHOICE:
        return _TOOL_CHOICE[choice]
    names = [choice] if isinstance(choice, str) else choice
    if (
        not isinstance(names, list | tuple)
        or not names
        or not all(isinstance(n, str) for n in names)
    ):
        raise UnsupportedContent(
            'tool_choice: expected "auto", "none", "required" or a list of tool names',
            provider=PROVIDER,
        )
    unknown = [n for n in names if n not in tool_names]
    if unknown:
        raise UnsupportedContent(
            f"tool_choice names tools this request does not declare: {', '.join(unknown)}",
            provider=PROVIDER,
        )
    return {"allowed_tools": {"mode": "validated", "tools": list(names)}}


def _continuation(
    messages: list[ChatMessage], previous: str | None
) -> tuple[list[ChatMessage], str | None]:
    """The messages to send and the interaction they continue: those after the assistant
    message that came with `previous`, or all of them when none did."""
    if previous:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].metadata.get(INTERACTION_ID) == previous:
                return messages[index + 1 :], previous
    return messages, None


def to_request(
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike] = (),
    options: Mapping[str, Any] | None = None,
    *,
    model: str,
    store: MediaStore | None = None,
    stored: bool = False,
    stream: bool = False,
) -> InteractionsRequest:
    """The interactions body for `model` (`store` resolves media refs, `stored` is the
    body's `store`, `stream` asks for server-sent events); raises before anything is sent."""
    settings = wire_options(options, OPTION_ALIASES)
    previous = settings.pop("previous_interaction_id", None)
    prepared = prepare_messages(messages, store, ASSISTANT_MEDIA)
    system = [m.content for m in prepared if m.role == "system"]
    conversation = [m for m in prepared if m.role != "system"]
    sent, continued_from = _continuation(conversation, previous if stored else None)
    body: dict[str, Any] = {"model": model, "input": _steps(sent)}
    if system:
        body["system_instruction"] = "\n\n".join(system)
    specs = prepare_tools(tools)
    if specs:
        body["tools"] = [
            {
                "type": "function",
                "name": s.name,
                "description": s.description,
                "parameters": s.parameters,
            }
            for s in specs
        ]
    if isinstance(settings.get("stop_sequences"), str):
        settings["stop_sequences"] = [settings["stop_sequences"]]
    if "tool_choice" in settings:
        settings["tool_choice"] = _tool_choice(settings["tool_choice"], [s.name for s in specs])
    body.update({k: settings.pop(k) for k in list(settings) if k in _TOP_LEVEL})
    if settings:
        body["generation_config"] = settings
    if continued_from is not None:
        body["previous_interaction_id"] = continued_from
    body["store"] = stored
    if stream:
        body["stream"] = True
    return InteractionsRequest(body=body, continued_from=continued_from)


def _reply_media(item: Mapping[str, Any]) -> MediaPart:
    mime_type = str(item.get("mime_type") or "")
    kind = media_kind_for_mime(mime_type)
    if kind is None:
        raise UnsupportedContent(
            f"the reply holds media of type {mime_type!r}, which fits no message part kind",
            provider=PROVIDER,
        )
    if item.get("uri"):
        return _MEDIA_CLASSES[kind](mime_type=mime_type, url=item["uri"])
    try:
        data = decode_base64(str(item.get("data") or ""), "data")
    except ValueError as error:
        raise MalformedResponse(str(error), provider=PROVIDER) from None
    return _MEDIA_CLASSES[kind](mime_type=mime_type, data=data)


def _thought(step: Mapping[str, Any]) -> dict[str, Any] | None:
    signature = step.get("signature")
    if not isinstance(signature, str) or not signature:
        return None  # an empty or redacted thought: nothing to echo back
    summary = [
        item["text"]
        for item in step.get("summary") or []
        if isinstance(item, Mapping) and item.get("type") == "text" and item.get("text")
    ]
    return {"signature": signature.encode("utf-8"), "summary": summary}


def _output_steps(steps: list[Any]) -> list[Mapping[str, Any]]:
    """The steps after the last input step (a reply may or may not echo its input)."""
    last_input = max(
        (
            i
            for i, s in enumerate(steps)
            if isinstance(s, Mapping) and s.get("type") in _INPUT_STEPS
        ),
        default=-1,
    )
    return [s for s in steps[last_input + 1 :] if isinstance(s, Mapping)]


def _tokens(usage: Mapping[str, Any], *names: str) -> int:
    return sum(int(usage.get(name) or 0) for name in names)


def from_response(
    interaction: Any,
    *,
    model: str,
    stored: bool = False,
    continued_from: str | None = None,
    latency_ms: float = 0.0,
) -> ChatResponse:
    """The neutral response to an `Interaction` resource (a JSON object) answering a
    request that continued `continued_from`; the interaction id is kept when it was
    `stored`. Raises for a failed interaction, a body that is not
    an interaction, and the silent empty reply."""
    if not isinstance(interaction, Mapping) or not isinstance(interaction.get("steps", []), list):
        raise MalformedResponse("the reply is not an Interaction object", provider=PROVIDER)
    status = interaction.get("status")
    if status == "failed":
        errors = interaction.get("errors") or []
        first = errors[0] if errors and isinstance(errors[0], Mapping) else {}
        raise ServerError(
            scrub(str(first.get("message") or "the interaction failed")),
            provider=PROVIDER,
            code=None if first.get("code") is None else str(first["code"]),
        )
    parts: list[TextPart | MediaPart] = []
    calls: list[ToolCall] = []
    thoughts: list[dict[str, Any]] = []
    for step in _output_steps(interaction.get("steps") or []):
        kind = step.get("type")
        if kind == "model_output":
            for item in step.get("content") or []:
                if not isinstance(item, Mapping):
                    continue
                if item.get("type") == "text" and isinstance(item.get("text"), str):
                    parts.append(TextPart(text=item["text"]))
                elif item.get("type") in _MEDIA_CLASSES:
                    parts.append(_reply_media(item))
        elif kind == "function_call":
            arguments = step.get("arguments") or {}
            if not isinstance(arguments, Mapping):
                raise MalformedResponse(
                    f"the arguments of the call to {step.get('name')!r} are not a JSON object",
                    provider=PROVIDER,
                )
            calls.append(
                ToolCall(
                    id=str(step.get("id") or ""),
                    name=str(step.get("name") or ""),
                    arguments=dict(arguments),
                )
            )
        elif kind == "thought":
            thought = _thought(step)
            if thought is not None:
                thoughts.append(thought)
    reject_silent_empty(
        bool(parts or calls),
        status,
        provider=PROVIDER,
        explanation="the interaction had no output steps and no status",
    )
    interaction_id = interaction.get("id") if stored else None
    metadata: dict[str, Any] = {}
    if interaction_id:
        metadata[INTERACTION_ID] = interaction_id
    if thoughts:
        metadata[THOUGHTS] = thoughts
    usage = interaction.get("usage") or {}
    return ChatResponse(
        message=ChatMessage(role="assistant", parts=parts, tool_calls=calls, metadata=metadata),
        usage=TokenUsage(
            input_tokens=_tokens(usage, "total_input_tokens"),
            output_tokens=_tokens(usage, "total_output_tokens", "total_thought_tokens"),
            cached_tokens=_tokens(usage, "total_cached_tokens"),
        ),
        finish_reason=None if status is None else str(status),
        model_version=str(interaction.get("model") or model),
        latency_ms=latency_ms,
        interaction_id=interaction_id or None,
        continued_from=continued_from,
    )


class StreamAssembler:
    """Builds the `Interaction` resource a streamed reply describes, event by event.

    Events are the JSON objects of the server-sent stream (`interaction.created`,
    `step.start`, `step.delta`, `step.stop`, `interaction.status_update`,
    `interaction.completed`, `error`). `last_event_id` is where a resumed read continues
    from; `completed` says whether the stream reached its end."""

    def __init__(self) -> None:
        self.resource: dict[str, Any] = {}
        self.steps: dict[int, dict[str, Any]] = {}
        self.arguments: dict[int, str] = {}
        self.last_event_id: str | None = None
        self.completed = False

    @property
    def interaction_id(self) -> str | None:
        """The interaction's id, once an event has named it."""
        value = self.resource.get("id")
        return value if isinstance(value, str) and value else None

    def add(self, event: Any) -> None:
        """Apply one event; an `error` event raises `ServerError`, a non-object
        `MalformedResponse`."""
        if not isinstance(event, Mapping):
            raise MalformedResponse("a stream event is not a JSON object", provider=PROVIDER)
        if isinstance(event.get("event_id"), str):
            self.last_event_id = event["event_id"]
        kind = event.get("event_type")
        if kind in ("interaction.created", "interaction.completed"):
            self.resource.update(event.get("interaction") or {})
            self.completed = self.completed or kind == "interaction.completed"
        elif kind == "interaction.status_update":
            self.resource["status"] = event.get("status")
            if event.get("interaction_id"):
                self.resource.setdefault("id", event["interaction_id"])
            if event.get("usage"):
                self.resource["usage"] = event["usage"]
        elif kind == "step.start" and isinstance(event.get("step"), Mapping):
            self.steps[int(event.get("index") or 0)] = dict(event["step"])
        elif kind == "step.delta" and isinstance(event.get("delta"), Mapping):
            self._delta(int(event.get("index") or 0), event["delta"])
        elif kind == "step.stop" and event.get("usage"):
            self.resource["usage"] = event["usage"]
        elif kind == "error":
            error = event.get("error") or {}
            raise ServerError(
                scrub(str(error.get("message") or "the stream reported an error")),
                provider=PROVIDER,
                code=None if error.get("code") is None else str(error["code"]),
            )

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        step = self.steps.setdefault(index, {"type": "model_output"})
        kind = delta.get("type")
        if kind == "text":
            content = step.setdefault("content", [])
            if content and content[-1].get("type") == "text":
                content[-1] = {**content[-1], "text": content[-1]["text"] + str(delta["text"])}
            else:
                content.append({"type": "text", "text": str(delta.get("text") or "")})
        elif kind in _MEDIA_CLASSES:
            step.setdefault("content", []).append(dict(delta))
        elif kind == "thought_signature":
            step["signature"] = step.get("signature", "") + str(delta.get("signature") or "")
        elif kind == "thought_summary" and isinstance(delta.get("content"), Mapping):
            step.setdefault("summary", []).append(dict(delta["content"]))
        elif kind == "arguments_delta":
            self.arguments[index] = self.arguments.get(index, "") + str(
                delta.get("arguments") or ""
            )

    def interaction(self) -> dict[str, Any]:
        """The assembled resource (streamed arguments parsed; `MalformedResponse` when
        they are not JSON)."""
        steps = []
        for index in sorted(self.steps):
            step = self.steps[index]
            if index in self.arguments:
                try:
                    step = {**step, "arguments": json.loads(self.arguments[index])}
                except ValueError:
                    raise MalformedResponse(
                        f"the streamed arguments of the call to {step.get('name')!r} are not JSON",
                        provider=PROVIDER,
                    ) from None
            steps.append(step)
        if not steps and isinstance(self.resource.get("steps"), list):
            return dict(self.resource)
        return {**self.resource, "steps": steps}
