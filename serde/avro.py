"""Avro form of agent events: the shipped schema versions, log levels, encode/decode, checks.

The schemas live in `schemas/eventlog/v<N>.avsc` (package data) and are parsed once, at
import. `to_record` turns an event into an Avro record for a schema version at a log
level; `from_record` turns a record read under any version back into an `AgentEvent`.
At the STANDARD level long text keeps a prefix plus its full length and a `truncated`
flag, so no field ever changes type; VERBOSE keeps the full text. Secrets (the writer's
`redact`: a job's `Redactor`, by default anything that looks like an API key or bearer
token) are replaced at every level, before any text is cut, and media appear only as refs.
Metadata strings (of parts, messages and tool calls, nested ones in JSON values too) are
redacted the same way and, at STANDARD, clipped to the same limit (the schema's metadata
strings have no length fields, so a clipped one ends in "…"); bytes metadata such as
Gemini thought signatures are kept as they are.

`check_compatible(old, new)` (from `avro_compat`) lists what stops a new schema from
reading data written with the old one and the old from reading data written with the new.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from importlib import resources
from typing import Any

import fastavro

from streamagents.serde.avro_binary import RecordEncoder
from streamagents.serde.avro_compat import check_compatible
from streamagents.serde.chat import ServerToolEvidence, TokenUsage
from streamagents.serde.event_storage import stored_attributes
from streamagents.serde.events import AgentEvent, EventType, RunEvent
from streamagents.serde.messages import ChatMessage, Part, TextPart, ToolCall
from streamagents.serde.safe_text import clip, is_credential_name, redact_secrets

__all__ = [
    "DEFAULT_TEXT_LIMIT",
    "LATEST_VERSION",
    "SCHEMA_VERSIONS",
    "LogLevel",
    "check_compatible",
    "from_record",
    "parsed_schema",
    "record_encoder",
    "record_maker",
    "schema_json",
    "to_record",
]

DEFAULT_TEXT_LIMIT = 2048
"""Characters of each text a STANDARD log keeps."""


class LogLevel(str, Enum):
    """How much an event log keeps: nothing, bounded text, or full text."""

    OFF = "off"
    STANDARD = "standard"
    VERBOSE = "verbose"

    @classmethod
    def parse(cls, value: LogLevel | str) -> LogLevel:
        """The level named by `value` (case-insensitive), or a ValueError naming the choices."""
        try:
            return cls(value.lower() if isinstance(value, str) else value)
        except ValueError:
            choices = ", ".join(level.value for level in cls)
            raise ValueError(f"event log level: {value!r} is not one of {choices}") from None


def _load_schemas() -> dict[int, dict[str, Any]]:
    folder = resources.files("streamagents.serde").joinpath("schemas", "eventlog")
    schemas: dict[int, dict[str, Any]] = {}
    for entry in folder.iterdir():
        match = re.fullmatch(r"v(\d+)\.avsc", entry.name)
        if match:
            schemas[int(match.group(1))] = json.loads(entry.read_text(encoding="utf-8"))
    return dict(sorted(schemas.items()))


_SCHEMAS = _load_schemas()
_PARSED = {version: fastavro.parse_schema(schema) for version, schema in _SCHEMAS.items()}
SCHEMA_VERSIONS: tuple[int, ...] = tuple(_SCHEMAS)
LATEST_VERSION: int = SCHEMA_VERSIONS[-1]


def _check_version(version: int) -> int:
    if version not in _SCHEMAS:
        known = ", ".join(str(v) for v in SCHEMA_VERSIONS)
        raise ValueError(f"event log schema version {version} does not exist (known: {known})")
    return version


def schema_json(version: int = LATEST_VERSION) -> dict[str, Any]:
    """The schema of `version` as written in its .avsc file (a fresh copy)."""
    return json.loads(json.dumps(_SCHEMAS[_check_version(version)]))


def parsed_schema(version: int = LATEST_VERSION) -> dict[str, Any]:
    """The schema of `version` as parsed by fastavro, shared and parsed once."""
    return _PARSED[_check_version(version)]


@functools.cache
def record_encoder(version: int = LATEST_VERSION) -> RecordEncoder:
    """The Avro binary encoder of `version`'s records (as `to_record` builds them), shared."""
    return RecordEncoder(_SCHEMAS[_check_version(version)])


def _field_type(record: dict[str, Any], name: str) -> Any:
    return next(field["type"] for field in record["fields"] if field["name"] == name)


def _items_record(array: dict[str, Any]) -> dict[str, Any]:
    return array["items"]


def _has_metadata(record: dict[str, Any]) -> bool:
    return any(field["name"] == "metadata" for field in record["fields"])


class _VersionShape:
    """What one schema version can hold, worked out once from its JSON."""

    def __init__(self, schema: dict[str, Any]) -> None:
        payload = _field_type(schema, "payload")
        message = _items_record(_field_type(payload, "messages"))
        part = _items_record(_field_type(message, "parts"))
        call = _items_record(_field_type(message, "tool_calls"))
        self.event_types = frozenset(_field_type(schema, "event_type")["symbols"])
        self.part_metadata = _has_metadata(part)
        self.message_metadata = _has_metadata(message)
        self.call_metadata = _has_metadata(call)
        self.interactions = any(f["name"] == "interaction_id" for f in payload["fields"])
        self.evidence = any(f["name"] == "evidence" for f in payload["fields"])
        self.answered_by = any(f["name"] == "fallback" for f in payload["fields"])
        self.input_record = any(f["name"] == "input_record" for f in payload["fields"])


_SHAPES = {version: _VersionShape(schema) for version, schema in _SCHEMAS.items()}


Redact = Callable[[str], str]
"""What every text of a record passes before it is kept (`redact_secrets`, a `Redactor`)."""


def _bounded(text: str, limit: int | None, redact: Redact) -> dict[str, Any]:
    text = redact(text)
    length = len(text)
    if limit is not None and length > limit:
        return {"text": text[:limit], "original_length": length, "truncated": True}
    return {"text": text, "original_length": length, "truncated": False}


# Union branches are named explicitly (fastavro's tuple notation: `(branch, value)`), so the
# writer does not have to try each branch against the value: about 10% faster writes.
_BOUNDED_TEXT = "io.streamagents.eventlog.BoundedText"
_TOKEN_USAGE = "io.streamagents.eventlog.TokenUsage"
_BYTES_VALUE = "io.streamagents.eventlog.BytesValue"
_JSON_VALUE = "io.streamagents.eventlog.JsonValue"


def _string(value: str | None) -> tuple[str, str] | None:
    return None if value is None else ("string", value)


def _long(value: int | None) -> tuple[str, int] | None:
    return None if value is None else ("long", value)


def _double(value: float | None) -> tuple[str, float] | None:
    return None if value is None else ("double", value)


def _boolean(value: bool | None) -> tuple[str, bool] | None:
    return None if value is None else ("boolean", value)


def _optional_bounded(
    text: str | None, limit: int | None, redact: Redact
) -> tuple[str, dict[str, Any]] | None:
    return None if text is None else (_BOUNDED_TEXT, _bounded(text, limit, redact))


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"metadata value of type {type(value).__name__} is not JSON")


_METADATA_BRANCHES = {bool: "boolean", int: "long", float: "double", str: "string"}


def _safe_string(name: str, value: str, limit: int | None, redact: Redact) -> str:
    """A metadata string as the log keeps it: redacted (all of it under a credential's
    name), and at most `limit` characters."""
    value = "[REDACTED]" if value and is_credential_name(name) else redact(value)
    return value if limit is None else clip(value, limit)


def _safe_json(value: Any, name: str, limit: int | None, redact: Redact) -> Any:
    """`value` with every string in it made safe; bytes and numbers stay as they are."""
    if isinstance(value, str):
        return _safe_string(name, value, limit, redact)
    if isinstance(value, dict):
        return {k: _safe_json(v, str(k), limit, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe_json(v, name, limit, redact) for v in value]
    return value


def _metadata_value(name: str, value: Any, limit: int | None, redact: Redact) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return ("string", _safe_string(name, value, limit, redact))
    branch = _METADATA_BRANCHES.get(type(value))
    if branch is not None:
        return (branch, value)
    if isinstance(value, bool | int | float):  # a subclass: fastavro finds the branch
        return value
    if isinstance(value, bytes | bytearray):  # e.g. a thought signature: kept as it is
        return (_BYTES_VALUE, {"bytes": bytes(value)})
    safe = _safe_json(value, name, limit, redact)
    return (_JSON_VALUE, {"json": json.dumps(safe, default=_json_default, separators=(",", ":"))})


def _metadata(metadata: dict[str, Any], limit: int | None, redact: Redact) -> dict[str, Any]:
    if not metadata:
        return {}
    return {k: _metadata_value(k, v, limit, redact) for k, v in metadata.items()}


class _Encoder:
    """Turns events (`AgentEvent`s, `RunEvent`s) into Avro records for one schema version
    and level.

    Every record field is set, even when null: fastavro writes absent fields far slower."""

    def __init__(self, version: int, level: LogLevel, text_limit: int, redact: Redact) -> None:
        self.shape = _SHAPES[_check_version(version)]
        self.limit = None if level is LogLevel.VERBOSE else text_limit
        self.redact = redact
        self.fields = self._fields()

    def part(self, part: Part) -> dict[str, Any]:
        if isinstance(part, TextPart):
            record: dict[str, Any] = {
                "kind": "text",
                "text": _optional_bounded(part.text, self.limit, self.redact),
                "mime_type": None,
                "sha256": None,
                "size_bytes": None,
                "uri": None,
                "url": None,
            }
        else:
            if part.data is not None:  # an AgentEvent refused it already; a RunEvent did not
                raise ValueError(
                    f"{part.kind} part ({part.mime_type}, {len(part.data)} bytes) holds inline "
                    "data; events carry media only as store refs or URLs, so offload it first "
                    "(MediaStore.offload)"
                )
            ref = part.ref
            record = {
                "kind": part.kind,
                "text": None,
                "mime_type": _string(part.mime_type),
                "sha256": None if ref is None else ("string", ref.sha256),
                "size_bytes": None if ref is None else ("long", ref.size_bytes),
                "uri": None if ref is None else _string(ref.uri),
                "url": _string(part.url),
            }
        if self.shape.part_metadata:
            record["metadata"] = _metadata(part.metadata, self.limit, self.redact)
        return record

    def tool_call(self, call: ToolCall) -> dict[str, Any]:
        arguments = json.dumps(call.arguments, separators=(",", ":"))
        record = {
            "id": call.id,
            "name": call.name,
            "arguments": _bounded(arguments, self.limit, self.redact),
        }
        if self.shape.call_metadata:
            record["metadata"] = _metadata(call.metadata, self.limit, self.redact)
        return record

    def message(self, message: ChatMessage) -> dict[str, Any]:
        parts = message.parts
        record = {
            "role": message.role,
            "content": None
            if parts
            else _optional_bounded(message.content or None, self.limit, self.redact),
            "parts": [self.part(p) for p in parts],
            "tool_calls": [self.tool_call(c) for c in message.tool_calls],
            "tool_call_id": _string(message.tool_call_id),
            "name": _string(message.name),
            "is_error": message.is_error,
        }
        if self.shape.message_metadata:
            record["metadata"] = _metadata(message.metadata, self.limit, self.redact)
        return record

    def event(self, event: AgentEvent | RunEvent) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "messages": [],
            "tool_calls": [],
            "tool_results": [],
            "usage": None,
            "model": None,
            "latency_ms": None,
            "error_class": None,
            "error_message": None,
            "finish_reason": None,
            "attempts": None,
            "cost_usd": None,
            "attributes": {},
        }
        if self.shape.interactions:
            payload["interaction_id"] = payload["continued_from"] = None
        if self.shape.evidence:
            payload["evidence"] = []
        if self.shape.answered_by:
            payload["answered_provider"] = payload["fallback"] = None
        if self.shape.input_record:
            payload["input_record"] = None
        # Only the fields the event has: all of an AgentEvent's, those given to a RunEvent;
        # the others are facts stored as attributes, by the one table of them.
        fields = self.fields
        typed = event.payload
        for name, value in vars(typed).items():
            convert = fields.get(name)
            if convert is not None:
                payload[name] = convert(value)
        event_type = event.event_type.value
        attributes = stored_attributes(event_type, typed)
        if attributes:
            payload["attributes"] = {k: self.redact(v) for k, v in attributes.items()}
        return {
            "event_id": event.event_id,
            "event_type": event_type if event_type in self.shape.event_types else "unknown",
            "job_id": event.job_id,
            "key": _string(event.key),
            "run_id": _string(event.run_id),
            "sequence": event.sequence,
            "timestamp": event.timestamp_ms,
            "upstream_event_id": _string(event.upstream_event_id),
            "payload": payload,
        }

    def _fields(self) -> dict[str, Callable[[Any], Any]]:
        """How each payload field this version holds becomes its record value (attributes
        apart: `stored_attributes` gives them)."""
        limit, redact = self.limit, self.redact
        fields: dict[str, Callable[[Any], Any]] = {
            "messages": lambda messages: [self.message(m) for m in messages],
            "tool_calls": lambda calls: [self.tool_call(c) for c in calls],
            "tool_results": lambda results: [self.message(m) for m in results],
            "usage": lambda usage: None if usage is None else (_TOKEN_USAGE, self.usage(usage)),
            "model": _string,
            "latency_ms": _double,
            "error_class": _string,
            "error_message": lambda text: _optional_bounded(text, limit, redact),
            "finish_reason": _string,
            "attempts": _long,
            "cost_usd": _double,
        }
        if self.shape.interactions:
            fields["interaction_id"] = fields["continued_from"] = _string
        if self.shape.evidence:
            fields["evidence"] = lambda found: [self.evidence(e) for e in found]
        if self.shape.answered_by:
            fields["answered_provider"] = _string
            fields["fallback"] = _boolean
        if self.shape.input_record:
            fields["input_record"] = lambda text: _optional_bounded(text, limit, redact)
        return fields

    def usage(self, usage: TokenUsage) -> dict[str, Any]:
        record = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
        if self.shape.evidence:  # cached_tokens came in the same version (v4)
            record["cached_tokens"] = usage.cached_tokens
        return record

    def evidence(self, evidence: ServerToolEvidence) -> dict[str, Any]:
        def text(value: str | None) -> tuple[str, str] | None:
            if value is None:
                return None
            value = self.redact(value)
            return _string(value if self.limit is None else clip(value, self.limit))

        return {
            "tool": evidence.tool,
            "queries": [self.redact(q) for q in evidence.queries],
            "sources": [{"uri": s.uri, "title": s.title} for s in evidence.sources],
            "url": _string(evidence.url),
            "status": _string(evidence.status),
            "language": _string(evidence.language),
            "code": text(evidence.code),
            "outcome": _string(evidence.outcome),
            "output": text(evidence.output),
        }


@functools.cache
def record_maker(
    version: int = LATEST_VERSION,
    level: LogLevel | str = LogLevel.STANDARD,
    text_limit: int = DEFAULT_TEXT_LIMIT,
    redact: Redact = redact_secrets,
) -> Callable[[AgentEvent | RunEvent | str], dict[str, Any]]:
    """`to_record` for one version, level and text limit, worked out once (for a writer),
    every text passing `redact` (a job's `Redactor`: hashable, as the cache needs)."""
    level = LogLevel.parse(level)
    if level is LogLevel.OFF:
        raise ValueError("event log level off records nothing; skip the event instead")
    encoder = _Encoder(version, level, text_limit, redact)

    def record(event: AgentEvent | RunEvent | str) -> dict[str, Any]:
        if isinstance(event, str):
            event = AgentEvent.model_validate_json(event)
        return encoder.event(event)

    return record


def to_record(
    event: AgentEvent | RunEvent | str,
    *,
    version: int = LATEST_VERSION,
    level: LogLevel | str = LogLevel.STANDARD,
    text_limit: int = DEFAULT_TEXT_LIMIT,
) -> dict[str, Any]:
    """The Avro record of an event (a model, a runtime's `RunEvent` or JSON text) for a
    schema version, for fastavro: each non-null union value is a `(branch name, value)` pair.

    JSON text is validated as an `AgentEvent` first (a pydantic ValidationError, which is a
    ValueError, names what is wrong); a `RunEvent` is taken as it is (its parts are checked
    for inline media, which raises a ValueError)."""
    return record_maker(version, LogLevel.parse(level), text_limit)(event)


def _text(bounded: dict[str, Any] | None) -> str:
    return "" if bounded is None else bounded["text"]


def _decode_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    if not metadata:
        return {}
    return {k: _decode_metadata_value(v) for k, v in metadata.items()}


def _decode_metadata_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return value["bytes"] if "bytes" in value else json.loads(value["json"])


def _decode_part(part: dict[str, Any]) -> dict[str, Any]:
    metadata = _decode_metadata(part.get("metadata"))
    if part["kind"] == "text":
        return {"kind": "text", "text": _text(part["text"]), "metadata": metadata}
    decoded: dict[str, Any] = {
        "kind": part["kind"],
        "mime_type": part["mime_type"],
        "metadata": metadata,
    }
    if part.get("sha256") is not None:
        decoded["ref"] = {
            "sha256": part["sha256"],
            "mime_type": part["mime_type"],
            "size_bytes": part["size_bytes"],
            "uri": part.get("uri"),
        }
    else:
        decoded["url"] = part["url"]
    return decoded


def _decode_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call["arguments"]
    if arguments["truncated"]:
        decoded_arguments: dict[str, Any] = {"$truncated": arguments["text"]}
    else:
        decoded_arguments = json.loads(arguments["text"])
    return {
        "id": call["id"],
        "name": call["name"],
        "arguments": decoded_arguments,
        "metadata": _decode_metadata(call.get("metadata")),
    }


def _decode_message(message: dict[str, Any]) -> ChatMessage:
    fields: dict[str, Any] = {
        "role": message["role"],
        "tool_calls": [_decode_call(c) for c in message["tool_calls"]],
        "tool_call_id": message["tool_call_id"],
        "name": message["name"],
        "is_error": message["is_error"],
        "metadata": _decode_metadata(message.get("metadata")),
    }
    if message["parts"]:
        fields["parts"] = [_decode_part(p) for p in message["parts"]]
    else:
        fields["content"] = _text(message["content"])
    return ChatMessage.model_validate(fields)


def _millis(value: datetime | int) -> int:
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    return value


def from_record(record: dict[str, Any]) -> AgentEvent:
    """The event an Avro record (read under any shipped version) describes.

    Truncated text comes back as its prefix; truncated tool arguments come back as
    `{"$truncated": "<prefix of the JSON>"}`."""
    payload = record["payload"]
    error_message = payload.get("error_message")
    input_record = payload.get("input_record")
    attributes = payload["attributes"]
    if input_record is not None and input_record["truncated"]:
        attributes = {**attributes, "input_record_clipped": "true"}
    return AgentEvent.model_validate(
        {
            "event_id": record["event_id"],
            "event_type": EventType(record["event_type"]),
            "job_id": record["job_id"],
            "key": record["key"],
            "run_id": record["run_id"],
            "sequence": record["sequence"],
            "timestamp_ms": _millis(record["timestamp"]),
            "upstream_event_id": record["upstream_event_id"],
            "payload": {
                "messages": [_decode_message(m) for m in payload["messages"]],
                "tool_calls": [_decode_call(c) for c in payload["tool_calls"]],
                "tool_results": [_decode_message(m) for m in payload["tool_results"]],
                "usage": payload["usage"],
                "model": payload["model"],
                "latency_ms": payload["latency_ms"],
                "error_class": payload["error_class"],
                "error_message": None if error_message is None else error_message["text"],
                "finish_reason": payload.get("finish_reason"),
                "attempts": payload.get("attempts"),
                "cost_usd": payload.get("cost_usd"),
                "attributes": attributes,
                "interaction_id": payload.get("interaction_id"),
                "continued_from": payload.get("continued_from"),
                "evidence": payload.get("evidence") or [],
                "answered_provider": payload.get("answered_provider"),
                "fallback": payload.get("fallback"),
                "input_record": None if input_record is None else input_record["text"],
            },
        }
    )
