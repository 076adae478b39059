"""Checks and resolves a neutral request (messages, tools, options) before a wire encodes it.

Every wire builds its request through `prepare_messages`, so the same rules give the
same errors for every provider and for every place media can appear:

- messages may be `ChatMessage` objects or their JSON form (dicts); dicts are validated
  by the message model, and its own error sentence is raised as `InvalidContent`;
- store refs are read from the media store (bytes verified against the digest);
- inline data that is still text (a message built without validation) is decoded with
  the message model's strict base64 rule, giving the message model's error;
- media in an assistant message is refused (`UnsupportedContent`);
- media the provider holds as a file (`files`, from `upload_media`) become `UploadedMedia`,
  whose bytes are never read.

Generation options pass through `wire_options`, which applies the wire's alias table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from streamagents.connectors.media import MediaStore, MediaStoreError
from streamagents.connectors.providers.errors import InvalidContent, UnsupportedContent
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import (
    ChatMessage,
    MediaPart,
    MediaRef,
    TextPart,
    decode_base64,
)

__all__ = [
    "ASSISTANT_MEDIA_RULE",
    "MessageLike",
    "ToolLike",
    "UploadedMedia",
    "inline_bytes",
    "media_digest",
    "prepare_messages",
    "prepare_tools",
    "validated_message",
    "wire_options",
]

MessageLike = ChatMessage | Mapping[str, Any]
ToolLike = ToolSpec | Mapping[str, Any]

ASSISTANT_MEDIA_RULE = (
    "only user messages and tool results carry media; an assistant message may hold text "
    "and tool calls only"
)


@dataclass(frozen=True)
class UploadedMedia:
    """A media part the provider holds as a file: the wire sends `reference` for its bytes.

    Made only by `prepare_messages` from the files the adapter uploaded, never from input,
    so a message cannot name another file of the provider's account."""

    kind: Literal["image", "audio", "video", "document"]
    """The media part's kind."""
    mime_type: str
    """The media's mime type."""
    reference: str
    """What the wire sends: Gemini's file URI, OpenAI's file id."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The part's metadata (its filename, ...)."""
    url: None = None
    """Never a URL: the file is the source."""


def media_digest(part: MediaPart) -> str | None:
    """The sha256 of the part's bytes (its ref's, or of its inline data); None for a URL."""
    if part.ref is not None:
        return part.ref.sha256
    data = inline_bytes(part)
    return None if data is None else hashlib.sha256(data).hexdigest()


def _first_error_sentence(error: ValidationError) -> str:
    """The message model's own sentence for the first problem (inputs are never quoted)."""
    first = error.errors(include_input=False)[0]
    cause = (first.get("ctx") or {}).get("error")
    if cause is not None:
        return str(cause)
    location = ".".join(str(item) for item in first["loc"])
    return f"{location}: {first['msg']}"


def validated_message(message: MessageLike) -> ChatMessage:
    """The message as a `ChatMessage`, a dict form validated (`InvalidContent` if it breaks a
    rule)."""
    if isinstance(message, ChatMessage):
        return message
    try:
        return ChatMessage.model_validate(message)
    except ValidationError as error:
        sentence = _first_error_sentence(error)
    raise InvalidContent(sentence)


def inline_bytes(part: MediaPart) -> bytes | None:
    """The part's inline bytes, decoding base64 text with the message model's strict rule."""
    data: Any = part.data
    if data is None or isinstance(data, bytes):
        return data
    try:
        return decode_base64(str(data), "data")
    except ValueError as error:
        sentence = str(error)
    raise InvalidContent(sentence)


def _stored_bytes(ref: MediaRef, kind: str, store: MediaStore | None) -> bytes:
    if store is None:
        raise InvalidContent(
            f"ref: a {kind} part refers to the media store, but this model has no "
            "media_store to resolve it (pass media_store=...)"
        )
    try:
        return store.get(ref)
    except MediaStoreError as error:
        reason = str(error)
    raise InvalidContent(reason)


def _resolved_part(
    part: TextPart | MediaPart, store: MediaStore | None, files: Mapping[str, str]
) -> TextPart | MediaPart | UploadedMedia:
    if isinstance(part, TextPart):
        return part
    if files:
        reference = files.get(media_digest(part) or "")
        if reference is not None:
            return UploadedMedia(part.kind, part.mime_type, reference, part.metadata)  # type: ignore[arg-type]
    if part.ref is not None:
        return part.model_copy(
            update={"ref": None, "data": _stored_bytes(part.ref, part.kind, store)}
        )
    if part.data is not None and not isinstance(part.data, bytes):
        return part.model_copy(update={"data": inline_bytes(part)})
    return part


def _resolved(
    message: ChatMessage, store: MediaStore | None, files: Mapping[str, str]
) -> ChatMessage:
    if not message.parts or not message.has_media:
        return message
    parts = [_resolved_part(p, store, files) for p in message.parts]
    return message.model_copy(update={"parts": parts})


def prepare_messages(
    messages: Iterable[MessageLike],
    store: MediaStore | None = None,
    assistant_media: frozenset[str] = frozenset(),
    files: Mapping[str, str] | None = None,
) -> list[ChatMessage]:
    """Validated messages whose media are inline bytes, URLs or `UploadedMedia`, ready for a
    wire encoder.

    `assistant_media` names the media kinds a wire can send back in an assistant message
    (none by default); `files` maps the sha256 of media the provider holds as a file to the
    file's reference (a part with those bytes becomes `UploadedMedia`)."""
    prepared = []
    for item in messages:
        message = validated_message(item)
        if (
            message.parts
            and message.role == "assistant"
            and any(p.kind not in assistant_media for p in message.media)
        ):
            kinds = ", ".join(sorted({p.kind for p in message.media}))
            raise UnsupportedContent(
                f"{ASSISTANT_MEDIA_RULE} (this assistant message has {kinds} parts)"
            )
        prepared.append(_resolved(message, store, files or {}))
    return prepared


def prepare_tools(tools: Iterable[ToolLike]) -> list[ToolSpec]:
    """Tool specs, validating dict forms."""
    return [t if isinstance(t, ToolSpec) else ToolSpec.model_validate(t) for t in tools]


def wire_options(options: Mapping[str, Any] | None, aliases: Mapping[str, str]) -> dict[str, Any]:
    """Generation options under the wire's own names: each key in `aliases` is renamed, and
    the entries of `extra_body` (an OpenAI-compatible server's own fields) are added as
    they are."""
    given = dict(options or {})
    extra = given.pop("extra_body", None) or {}
    return {**{aliases.get(key, key): value for key, value in given.items()}, **extra}
