"""The chat message model: messages made of typed content parts, tool calls and results.

A `ChatMessage` keeps a plain `content: str` and may carry typed `parts`:

- no parts: `content` is the message, as plain text;
- parts present: the parts are authoritative and `content` is the concatenation of the
  text parts (set automatically; an explicit `content` that disagrees is an error).

A media part (image, audio, video, document) has a `mime_type` and exactly one source:
inline `data` (bytes; base64 text is accepted on input), a `url`, or a `ref` into the
content-addressed media store. `repr` of a media part never shows its bytes, and no
validation error quotes its input (`hide_input_in_errors`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.functional_validators import BeforeValidator

__all__ = [
    "AGENT_DOCUMENTS",
    "MEDIA_PART_CLASSES",
    "AudioPart",
    "ChatMessage",
    "DocumentPart",
    "ImagePart",
    "MediaPart",
    "MediaRef",
    "Metadata",
    "Part",
    "Role",
    "TextPart",
    "ToolCall",
    "VideoPart",
    "decode_base64",
    "media_kind_for_mime",
]

AGENT_DOCUMENTS = "agent_documents"
"""Metadata flag of the user message holding an agent's documents, sent first in every
request: a wire with a context cache puts that message in the cache."""

Role = Literal["system", "user", "assistant", "tool"]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

_BYTES_TAG = "$bytes"


def decode_base64(text: str, field: str) -> bytes:
    """Decode standard or URL-safe base64 strictly, naming `field` when it is malformed."""
    cleaned = "".join(text.split())
    alphabet = b"-_" if ("-" in cleaned or "_" in cleaned) else None
    try:
        return base64.b64decode(cleaned.encode("ascii"), altchars=alphabet, validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(
            f"{field}: malformed base64 ({len(text)} characters); inline media data must be "
            "bytes or valid standard/URL-safe base64 text"
        ) from None


def _bytes_to_json(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {_BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {k: _bytes_to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bytes_to_json(v) for v in value]
    return value


def _bytes_from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_BYTES_TAG} and isinstance(value[_BYTES_TAG], str):
            return base64.b64decode(value[_BYTES_TAG])
        return {k: _bytes_from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes_from_json(v) for v in value]
    return value


def _serialize_metadata(value: dict[str, Any], info: SerializationInfo) -> dict[str, Any]:
    return _bytes_to_json(value) if info.mode_is_json() else value


Metadata = Annotated[
    dict[str, Any],
    BeforeValidator(_bytes_from_json),
    PlainSerializer(_serialize_metadata, when_used="always"),
]
"""Provider metadata to echo back (e.g. a Gemini thought signature as bytes).

Bytes survive a JSON round trip: they are written as `{"$bytes": "<base64>"}`."""


class MediaRef(BaseModel):
    """A reference to media held in the content-addressed media store."""

    model_config = _MODEL_CONFIG

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="Hex digest of the bytes.")
    mime_type: str = Field(description="Mime type of the media, e.g. image/png.")
    size_bytes: int = Field(ge=0, description="Length of the media in bytes.")
    uri: str | None = Field(default=None, description="Where the store keeps the object.")

    @field_validator("sha256", mode="before")
    @classmethod
    def _lowercase_digest(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


class TextPart(BaseModel):
    """A run of text."""

    model_config = _MODEL_CONFIG

    kind: Literal["text"] = "text"
    text: str = Field(description="The text itself.")
    metadata: Metadata = Field(default_factory=dict, description="Provider data to echo back.")


_OFFICE_DOCUMENT_TYPES = frozenset(
    {
        "application/pdf",
        "application/rtf",
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
    }
)
_OFFICE_DOCUMENT_PREFIXES = (
    "application/vnd.openxmlformats-officedocument.",
    "application/vnd.oasis.opendocument.",
)


def media_kind_for_mime(mime_type: str) -> str | None:
    """Return the media part kind a mime type belongs to, or None when it fits none."""
    essence = mime_type.split(";", 1)[0].strip().lower()
    major = essence.split("/", 1)[0]
    if major in ("image", "audio", "video") and "/" in essence:
        return major
    if major == "text" or essence in _OFFICE_DOCUMENT_TYPES:
        return "document"
    if essence.startswith(_OFFICE_DOCUMENT_PREFIXES):
        return "document"
    return None


_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")

_KIND_RULES = {
    "image": "image/*",
    "audio": "audio/*",
    "video": "video/*",
    "document": "application/pdf, text/* or an Office/OpenDocument type",
}


class _MediaPartBase(BaseModel):
    """Fields and rules shared by every media part kind."""

    model_config = _MODEL_CONFIG

    kind: str
    mime_type: str = Field(description="Mime type, which must match the part kind.")
    data: bytes | None = Field(default=None, description="Inline bytes (base64 text accepted).")
    url: str | None = Field(default=None, description="A URL the provider or tool can fetch.")
    ref: MediaRef | None = Field(default=None, description="A reference into the media store.")
    metadata: Metadata = Field(default_factory=dict, description="Provider data to echo back.")

    @field_validator("mime_type", mode="before")
    @classmethod
    def _normalize_mime(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("data", mode="before")
    @classmethod
    def _decode_data(cls, value: Any) -> Any:
        if isinstance(value, str):
            return decode_base64(value, "data")
        if isinstance(value, bytearray | memoryview):
            return bytes(value)
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not _URL_SCHEME.match(value):
            raise ValueError(
                "url: must be an absolute URL with a scheme (https://, gs://, s3://, ...); "
                "pass inline bytes as data instead"
            )
        return value

    @model_validator(mode="after")
    def _check_source_and_mime(self) -> _MediaPartBase:
        sources = [name for name in ("data", "url", "ref") if getattr(self, name) is not None]
        if len(sources) != 1:
            found = ", ".join(sources) if sources else "none"
            raise ValueError(
                f"{self.kind} part: needs exactly one source among data, url, ref (got {found})"
            )
        if media_kind_for_mime(self.mime_type) != self.kind:
            raise ValueError(
                f"mime_type: {self.mime_type!r} is not allowed in a {self.kind} part "
                f"(expected {_KIND_RULES[self.kind]})"
            )
        if self.ref is not None and media_kind_for_mime(self.ref.mime_type) != self.kind:
            raise ValueError(
                f"ref.mime_type: {self.ref.mime_type!r} does not fit a {self.kind} part "
                f"(expected {_KIND_RULES[self.kind]})"
            )
        return self

    @field_serializer("data", when_used="json")
    def _encode_data(self, value: bytes | None) -> str | None:
        return None if value is None else base64.b64encode(value).decode("ascii")

    @property
    def size_bytes(self) -> int | None:
        """Length of the media when known (inline data or a store ref), else None."""
        if self.data is not None:
            return len(self.data)
        return self.ref.size_bytes if self.ref is not None else None

    @property
    def source(self) -> Literal["data", "url", "ref"]:
        """Which of the three sources this part uses."""
        if self.data is not None:
            return "data"
        return "url" if self.url is not None else "ref"

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "mime_type", self.mime_type
        if self.data is not None:
            yield "data", _ByteCount(len(self.data))
        elif self.url is not None:
            yield "url", self.url
        else:
            yield "ref", self.ref
        if self.metadata:
            yield "metadata", sorted(self.metadata)


class _ByteCount(int):
    """Stands in for inline bytes in a repr: shows their length, never their content."""

    def __repr__(self) -> str:
        return f"<{int(self)} bytes>"


class ImagePart(_MediaPartBase):
    """An image (image/*)."""

    kind: Literal["image"] = "image"


class AudioPart(_MediaPartBase):
    """A sound recording (audio/*)."""

    kind: Literal["audio"] = "audio"


class VideoPart(_MediaPartBase):
    """A video (video/*)."""

    kind: Literal["video"] = "video"


class DocumentPart(_MediaPartBase):
    """A document: PDF, text/* or an Office/OpenDocument file."""

    kind: Literal["document"] = "document"


MediaPart = Union[ImagePart, AudioPart, VideoPart, DocumentPart]  # noqa: UP007
Part = Annotated[
    Union[TextPart, ImagePart, AudioPart, VideoPart, DocumentPart],  # noqa: UP007
    Field(discriminator="kind"),
]
MEDIA_PART_CLASSES: dict[str, type[MediaPart]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "video": VideoPart,
    "document": DocumentPart,
}
"""The media part class of each kind (the kinds `media_kind_for_mime` answers)."""


class ToolCall(BaseModel):
    """A model's request to run one tool."""

    model_config = _MODEL_CONFIG

    id: str = Field(description="The call id; a tool result echoes it as tool_call_id.")
    name: str = Field(description="Name of the tool to run.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments, as JSON.")
    metadata: Metadata = Field(
        default_factory=dict, description="Provider data to echo back, e.g. thought signatures."
    )


class ChatMessage(BaseModel):
    """One message of a conversation: text and/or typed parts, tool calls or a tool result."""

    model_config = _MODEL_CONFIG

    role: Role = Field(description="system, user, assistant or tool.")
    content: str = Field(default="", description="Plain text; with parts, their text joined.")
    parts: list[Part] = Field(default_factory=list, description="Typed content, in order.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Assistant only.")
    tool_call_id: str | None = Field(default=None, description="Tool results: the call answered.")
    name: str | None = Field(default=None, description="Tool results: the tool's name.")
    is_error: bool = Field(default=False, description="Tool results: the tool failed.")
    metadata: Metadata = Field(default_factory=dict, description="Free-form, echoed as is.")

    @model_validator(mode="after")
    def _check_rules(self) -> ChatMessage:
        if self.parts:
            text = "".join(p.text for p in self.parts if isinstance(p, TextPart))
            if "content" in self.model_fields_set and self.content != text:
                raise ValueError(
                    "content: must equal the concatenation of the text parts when parts are "
                    "given (leave content unset and it is derived)"
                )
            object.__setattr__(self, "content", text)
        if self.role == "system" and self.has_media:
            raise ValueError("parts: a system message carries text only, not media")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool_call_id: a tool message must name the call it answers")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"tool_calls: only assistant messages carry them, not {self.role}")
        return self

    @property
    def media(self) -> list[MediaPart]:
        """The media parts, in order."""
        return [p for p in self.parts if not isinstance(p, TextPart)]

    @property
    def has_media(self) -> bool:
        """Whether any part is media."""
        return any(not isinstance(p, TextPart) for p in self.parts)

    @property
    def is_empty(self) -> bool:
        """True when the message carries no text, no media and no tool calls."""
        return not (self.content or self.has_media or self.tool_calls)

    def text_parts(self) -> list[TextPart]:
        """The parts as given, or the content as one text part when there are none."""
        if self.parts:
            return [p for p in self.parts if isinstance(p, TextPart)]
        return [TextPart(text=self.content)] if self.content else []

    @classmethod
    def system(cls, text: str) -> ChatMessage:
        """A system instruction."""
        return cls(role="system", content=text)

    @classmethod
    def user(cls, content: str | list[Any]) -> ChatMessage:
        """A user message from text or from a list of parts."""
        if isinstance(content, str):
            return cls(role="user", content=content)
        return cls(role="user", parts=content)

    @classmethod
    def tool_result(
        cls,
        tool_call_id: str,
        name: str,
        content: str | list[Any],
        *,
        is_error: bool = False,
    ) -> ChatMessage:
        """The result of one tool call: text, or a list of text and media parts."""
        if isinstance(content, str):
            return cls(
                role="tool",
                content=content,
                tool_call_id=tool_call_id,
                name=name,
                is_error=is_error,
            )
        return cls(
            role="tool", parts=content, tool_call_id=tool_call_id, name=name, is_error=is_error
        )
