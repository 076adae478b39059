"""How typed event payloads are stored: the one conversion table between them and the log.

The stored form of a payload is the payload record of the event log's Avro schema (and of
an event's JSON text): the fields `STORED_FIELDS`, facts among them as a map of strings,
`attributes`. A payload model's field named like a stored field is stored there as it is;
any other field is the attribute of its name, written as text by the codec of its type
(`CODECS`): a missing value (None, an empty list) is not written. Reading takes an
attribute into its field only when writing the value back gives the same text, so a
payload read from a log writes the same record again; other attributes, and those of no
field, stay in the payload's `extra_attributes`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic reads it on Python < 3.12

from streamagents.serde.chat import RetryAttempt, ServerToolEvidence, TokenUsage
from streamagents.serde.event_payloads import PAYLOAD_MODELS
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = [
    "ATTRIBUTES",
    "CODECS",
    "STORED_FIELDS",
    "AttributeField",
    "Codec",
    "StoredPayload",
    "stored_attributes",
    "stored_payload",
    "typed_fields",
]


class StoredPayload(TypedDict):
    """A payload in the stored form: the Avro record's payload fields, as JSON has them."""

    messages: list[ChatMessage]
    tool_calls: list[ToolCall]
    tool_results: list[ChatMessage]
    usage: TokenUsage | None
    model: str | None
    latency_ms: float | None
    error_class: str | None
    error_message: str | None
    finish_reason: str | None
    attempts: int | None
    cost_usd: float | None
    attributes: dict[str, str]
    interaction_id: str | None
    continued_from: str | None
    evidence: list[ServerToolEvidence]
    answered_provider: str | None
    fallback: bool | None
    input_record: str | None


STORED_FIELDS = tuple(StoredPayload.__annotations__)
"""The fields of a stored payload, in the order an event's JSON text has them."""


class Codec(NamedTuple):
    """How a typed fact is written as an attribute's text, and read back from it."""

    write: Callable[[Any], str]
    read: Callable[[str], Any]


def _read_bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return text == "true"


_RETRIES = TypeAdapter(list[RetryAttempt])


def _write_retries(retries: list[RetryAttempt]) -> str:
    return json.dumps([retry.model_dump(mode="json") for retry in retries])


CODECS: dict[Any, Codec] = {
    str | None: Codec(str, str),
    int | None: Codec(str, int),
    float | None: Codec(lambda value: f"{value:g}", float),
    bool | None: Codec(lambda value: "true" if value else "false", _read_bool),
    list[str] | None: Codec(",".join, lambda text: text.split(",") if text else []),
    list[RetryAttempt]: Codec(_write_retries, _RETRIES.validate_json),
}
"""The codec of each type a payload's attribute field may have."""


class AttributeField(NamedTuple):
    """A payload field stored as an attribute: its name, codec and default (not written)."""

    name: str
    codec: Codec
    default: Any


def _attribute_fields(model: type[BaseModel]) -> tuple[AttributeField, ...]:
    """The attribute fields of a payload model, in its order."""
    found = []
    for name, field in model.model_fields.items():
        if name in STORED_FIELDS or name in ("kind", "extra_attributes"):
            continue
        codec = CODECS.get(field.annotation)
        if codec is None:
            raise TypeError(f"{model.__name__}.{name}: no attribute codec for {field.annotation}")
        found.append(AttributeField(name, codec, field.get_default(call_default_factory=True)))
    return tuple(found)


ATTRIBUTES: dict[str, tuple[AttributeField, ...]] = {
    kind: _attribute_fields(model) for kind, model in PAYLOAD_MODELS.items()
}
"""The table: each event type's attribute fields, in the order they are written."""

_FIELDS = {kind: frozenset(model.model_fields) for kind, model in PAYLOAD_MODELS.items()}


def stored_attributes(kind: str, payload: Any) -> dict[str, str]:
    """The attributes a payload model of `kind` is stored with: its attribute fields that
    have a value, then its extra attributes."""
    if kind == "unknown":
        return dict(payload.attributes)
    stored: dict[str, str] = {}
    for name, codec, default in ATTRIBUTES[kind]:
        value = getattr(payload, name)
        if value != default:
            stored[name] = codec.write(value)
    extra = payload.extra_attributes
    if extra:
        for name, text in extra.items():
            stored.setdefault(name, text)
    return stored


_EMPTY_PAYLOAD: dict[str, Any] = {
    name: [] if name in ("messages", "tool_calls", "tool_results", "evidence") else None
    for name in STORED_FIELDS
}
_OWN_STORED = {
    kind: tuple(name for name in STORED_FIELDS if name in fields and name != "attributes")
    for kind, fields in _FIELDS.items()
}


def stored_payload(kind: str, payload: BaseModel) -> StoredPayload:
    """The stored form of a payload model: every stored field, in order, at its default
    where the model has none (values are the model's own: messages stay models)."""
    stored = dict(_EMPTY_PAYLOAD)
    for name in _OWN_STORED[kind]:
        stored[name] = getattr(payload, name)
    stored["attributes"] = stored_attributes(kind, payload)
    return stored  # type: ignore[return-value]


_UNREAD = object()


def _read_attribute(field: AttributeField, text: str) -> Any:
    """The typed value of an attribute's text, or `_UNREAD` when it would not be written
    back the same."""
    try:
        value = field.codec.read(text)
    except (ValueError, TypeError, ValidationError):
        return _UNREAD
    if value == field.default or field.codec.write(value) != text:
        return _UNREAD
    return value


def typed_fields(kind: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The payload model fields of `kind` for `given`, which may be in the stored form:
    its `attributes` become typed fields (or extra attributes), stored fields the kind has
    none of are dropped when empty. Other names are left for validation to refuse."""
    if kind == "unknown" or ("attributes" not in given and _FIELDS[kind].issuperset(given)):
        return dict(given)
    fields = _FIELDS[kind]
    typed: dict[str, Any] = {}
    for name, value in given.items():
        if name == "attributes":
            continue
        empty = value is None or value == [] or value == ()
        if empty and name not in fields and name in STORED_FIELDS:
            continue  # the stored form has every field; an empty one says nothing
        typed[name] = value
    attributes = given.get("attributes") or {}
    if attributes:
        known = {field.name: field for field in ATTRIBUTES[kind]}
        extra = dict(typed.get("extra_attributes") or {})
        for name, text in attributes.items():
            field = known.get(name)
            value = _UNREAD if field is None or name in typed else _read_attribute(field, text)
            if value is _UNREAD:
                extra[name] = text
            else:
                typed[name] = value
        if extra:
            typed["extra_attributes"] = extra
    return typed
