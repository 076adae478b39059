"""Avro form of agent events: the shipped schema versions, log levels, encode/decode, checks.

The schemas live in `schemas/eventlog/v<N>.avsc` (package data) and are parsed once, at
import. `to_record` turns an event into an Avro record for a schema version at a log
level; `from_record` turns a record read under any version back into an `AgentEvent`.
At the STANDARD level long text keeps a prefix plus its full length and a `truncated`
flag, so no field ever changes type; VERBOSE keeps the full text. Secrets that look like
API keys or bearer tokens are replaced at every level, and media appear only as refs.

`check_compatible(old, new)` lists what stops a new schema from reading data written with
the old one and the old from reading data written with the new one.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from enum import Enum
from importlib import resources
from typing import Any

import fastavro
from streamagents.serde.events import AgentEvent, EventType
from streamagents.serde.messages import ChatMessage

__all__ = [
    "DEFAULT_TEXT_LIMIT",
    "LATEST_VERSION",
    "SCHEMA_VERSIONS",
    "LogLevel",
    "check_compatible",
    "from_record",
    "parsed_schema",
    "redact_secrets",
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


_SHAPES = {version: _VersionShape(schema) for version, schema in _SCHEMAS.items()}

# Secrets that must never reach a log: Google and OpenAI style API keys, bearer tokens and
# `key=value` pairs whose name says they are credentials. The name is kept, the value goes.
_SECRET = re.compile(
    r"AIza[0-9A-Za-z_\-]{30,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]{12,}=*"
    r"|(?i:\b(?:api[_-]?key|x-goog-api-key|access[_-]?token|secret|password|key)"
    r"[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9._~+/\-]{12,}"
)
_NAMED_SECRET = re.compile(r"^(.*?[=:]\s*[\"']?)", re.DOTALL)
REDACTED = "[REDACTED]"


def _redact_match(match: re.Match[str]) -> str:
    found = match.group(0)
    if found.startswith(("AIza", "sk-")):
        return REDACTED
    if found[:6].lower() == "bearer":
        return found[:6] + " " + REDACTED
    name = _NAMED_SECRET.match(found)
    return (name.group(1) if name else "") + REDACTED


def redact_secrets(text: str) -> str:
    """`text` with anything that looks like an API key, bearer token or password replaced."""
    return _SECRET.sub(_redact_match, text)


def _bounded(text: str, limit: int | None) -> dict[str, Any]:
    text = redact_secrets(text)
    length = len(text)
    if limit is not None and length > limit:
        return {"text": text[:limit], "original_length": length, "truncated": True}
    return {"text": text, "original_length": length, "truncated": False}


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"metadata value of type {type(value).__name__} is not JSON")


def _metadata_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value)}
    if isinstance(value, dict) and set(value) == {"$bytes"}:
        return {"bytes": base64.b64decode(value["$bytes"])}
    return {"json": json.dumps(value, default=_json_default, separators=(",", ":"))}


def _metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {k: _metadata_value(v) for k, v in metadata.items()} if metadata else {}


class _Encoder:
    """Turns JSON-form events into Avro records for one schema version and level."""

    def __init__(self, version: int, level: LogLevel, text_limit: int) -> None:
        self.shape = _SHAPES[_check_version(version)]
        self.limit = None if level is LogLevel.VERBOSE else text_limit

    def part(self, part: dict[str, Any]) -> dict[str, Any]:
        kind = part["kind"]
        record: dict[str, Any] = {"kind": kind}
        if kind == "text":
            record["text"] = _bounded(part["text"], self.limit)
        else:
            if part.get("data") is not None:
                raise ValueError(
                    f"{kind} part ({part.get('mime_type')}) holds inline data; the event log "
                    "takes media only as store refs or URLs, so offload it first"
                )
            ref = part.get("ref")
            record["mime_type"] = part["mime_type"]
            record["url"] = part.get("url")
            if ref is not None:
                record["sha256"] = ref["sha256"]
                record["size_bytes"] = ref["size_bytes"]
                record["uri"] = ref.get("uri")
        if self.shape.part_metadata:
            record["metadata"] = _metadata(part.get("metadata"))
        return record

    def tool_call(self, call: dict[str, Any]) -> dict[str, Any]:
        arguments = json.dumps(call.get("arguments") or {}, separators=(",", ":"))
        record = {
            "id": call["id"],
            "name": call["name"],
            "arguments": _bounded(arguments, self.limit),
        }
        if self.shape.call_metadata:
            record["metadata"] = _metadata(call.get("metadata"))
        return record

    def message(self, message: dict[str, Any]) -> dict[str, Any]:
        parts = message.get("parts") or ()
        content = message.get("content") or ""
        record = {
            "role": message["role"],
            "content": _bounded(content, self.limit) if content and not parts else None,
            "parts": [self.part(p) for p in parts],
            "tool_calls": [self.tool_call(c) for c in message.get("tool_calls") or ()],
            "tool_call_id": message.get("tool_call_id"),
            "name": message.get("name"),
            "is_error": bool(message.get("is_error")),
        }
        if self.shape.message_metadata:
            record["metadata"] = _metadata(message.get("metadata"))
        return record

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        payload = event.get("payload") or {}
        event_type = event["event_type"]
        error_message = payload.get("error_message")
        attributes = payload.get("attributes") or {}
        return {
            "event_id": event["event_id"],
            "event_type": event_type if event_type in self.shape.event_types else "unknown",
            "job_id": event["job_id"],
            "key": event.get("key"),
            "run_id": event.get("run_id"),
            "sequence": event.get("sequence", 0),
            "timestamp": event["timestamp_ms"],
            "upstream_event_id": event.get("upstream_event_id"),
            "payload": {
                "messages": [self.message(m) for m in payload.get("messages") or ()],
                "tool_calls": [self.tool_call(c) for c in payload.get("tool_calls") or ()],
                "tool_results": [self.message(m) for m in payload.get("tool_results") or ()],
                "usage": payload.get("usage"),
                "model": payload.get("model"),
                "latency_ms": payload.get("latency_ms"),
                "error_class": payload.get("error_class"),
                "error_message": (
                    None if error_message is None else _bounded(error_message, self.limit)
                ),
                "finish_reason": payload.get("finish_reason"),
                "attempts": payload.get("attempts"),
                "cost_usd": payload.get("cost_usd"),
                "attributes": {k: redact_secrets(v) for k, v in attributes.items()},
            },
        }


_ENCODERS: dict[tuple[int, LogLevel, int], _Encoder] = {}


def to_record(
    event: AgentEvent | dict[str, Any] | str,
    *,
    version: int = LATEST_VERSION,
    level: LogLevel | str = LogLevel.STANDARD,
    text_limit: int = DEFAULT_TEXT_LIMIT,
) -> dict[str, Any]:
    """The Avro record of an event (model, JSON text or JSON-form dict) for a version."""
    level = LogLevel.parse(level)
    if level is LogLevel.OFF:
        raise ValueError("event log level off records nothing; skip the event instead")
    encoder = _ENCODERS.get((version, level, text_limit))
    if encoder is None:
        encoder = _ENCODERS.setdefault(
            (version, level, text_limit), _Encoder(version, level, text_limit)
        )
    if isinstance(event, AgentEvent):
        event = event.model_dump(mode="json")
    elif isinstance(event, str):
        event = json.loads(event)
    return encoder.event(event)


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
                "attributes": payload["attributes"],
            },
        }
    )


# ---------------------------------------------------------------------------------------
# Schema compatibility

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _named_types(schema: Any, namespace: str | None, found: dict[str, Any]) -> None:
    """Collect every named type (record, enum, fixed) under its full and short name."""
    if isinstance(schema, list):
        for branch in schema:
            _named_types(branch, namespace, found)
        return
    if not isinstance(schema, dict):
        return
    kind = schema["type"]
    if kind in ("record", "error", "enum", "fixed"):
        name = schema["name"]
        space = schema.get("namespace", namespace) if "." not in name else name.rpartition(".")[0]
        full = name if "." in name else (f"{space}.{name}" if space else name)
        found[full] = schema
        found.setdefault(full.rpartition(".")[2], schema)
        if kind in ("record", "error"):
            for field in schema["fields"]:
                _named_types(field["type"], space, found)
    elif kind == "array":
        _named_types(schema["items"], namespace, found)
    elif kind == "map":
        _named_types(schema["values"], namespace, found)
    elif isinstance(kind, dict | list):
        _named_types(kind, namespace, found)


class _Resolver:
    """Compares an old and a new schema both ways and collects the problems."""

    def __init__(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.old_names: dict[str, Any] = {}
        self.new_names: dict[str, Any] = {}
        _named_types(old, old.get("namespace"), self.old_names)
        _named_types(new, new.get("namespace"), self.new_names)
        self.problems: list[str] = []
        self.seen: set[tuple[int, int]] = set()

    def _expand(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names.get(schema, names.get(schema.rpartition(".")[2], schema))
        if isinstance(schema, dict) and isinstance(schema["type"], dict | list):
            return self._expand(schema["type"], names)
        if isinstance(schema, dict) and schema["type"] in _PRIMITIVES and len(schema) == 1:
            return schema["type"]
        return schema

    @staticmethod
    def _describe(schema: Any) -> str:
        if isinstance(schema, str):
            return schema
        if isinstance(schema, list):
            return "[" + ", ".join(_Resolver._describe(s) for s in schema) + "]"
        if schema["type"] in ("record", "enum", "fixed", "error"):
            return f"{schema['type']} {schema['name']}"
        if schema["type"] in ("array", "map"):
            inner = schema["items"] if schema["type"] == "array" else schema["values"]
            return f"{schema['type']}<{_Resolver._describe(inner)}>"
        logical = schema.get("logicalType")
        return f"{schema['type']}({logical})" if logical else schema["type"]

    def compare(self, old: Any, new: Any, path: str) -> None:
        old = self._expand(old, self.old_names)
        new = self._expand(new, self.new_names)
        if isinstance(old, list) or isinstance(new, list):
            self._compare_unions(old, new, path)
            return
        if self._kind(old) != self._kind(new):
            self.problems.append(
                f"{path}: type changed from {self._describe(old)} to {self._describe(new)}"
            )
            return
        kind = self._kind(old)
        old_logical, new_logical = self._logical(old), self._logical(new)
        if old_logical != new_logical:
            self.problems.append(
                f"{path}: logical type changed from {old_logical} to {new_logical}"
            )
        if kind in ("record", "error"):
            self._compare_records(old, new, path)
        elif kind == "enum":
            self._compare_enums(old, new, path)
        elif kind == "array":
            self.compare(old["items"], new["items"], f"{path}[]")
        elif kind == "map":
            self.compare(old["values"], new["values"], f"{path}{{}}")
        elif kind == "fixed" and old["size"] != new["size"]:
            self.problems.append(f"{path}: fixed size changed from {old['size']} to {new['size']}")

    @staticmethod
    def _kind(schema: Any) -> str:
        return schema if isinstance(schema, str) else schema["type"]

    @staticmethod
    def _logical(schema: Any) -> str | None:
        return schema.get("logicalType") if isinstance(schema, dict) else None

    def _compare_unions(self, old: Any, new: Any, path: str) -> None:
        old_branches = old if isinstance(old, list) else [old]
        new_branches = new if isinstance(new, list) else [new]
        if not isinstance(new, list):
            self.problems.append(
                f"{path}: union {self._describe(old)} narrowed to {self._describe(new)}"
            )
            return
        for branch in old_branches:
            expanded = self._expand(branch, self.old_names)
            match = next(
                (
                    b
                    for b in new_branches
                    if self._same_branch(expanded, self._expand(b, self.new_names))
                ),
                None,
            )
            if match is None:
                self.problems.append(
                    f"{path}: union branch {self._describe(expanded)} removed "
                    f"(new type {self._describe(new)})"
                )
            else:
                self.compare(branch, match, path)

    @staticmethod
    def _same_branch(old: Any, new: Any) -> bool:
        old_kind = old if isinstance(old, str) else old["type"]
        new_kind = new if isinstance(new, str) else new["type"]
        if old_kind != new_kind:
            return False
        if old_kind in ("record", "enum", "fixed", "error"):
            return old["name"] == new["name"] or old["name"] in new.get("aliases", ())
        return True

    def _compare_records(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        marker = (id(old), id(new))
        if marker in self.seen:
            return
        self.seen.add(marker)
        if old["name"] != new["name"] and old["name"] not in new.get("aliases", ()):
            self.problems.append(
                f"{path}: record {old['name']} renamed to {new['name']} without an alias"
            )
        new_by_name = {f["name"]: f for f in new["fields"]}
        new_by_alias = {a: f for f in new["fields"] for a in f.get("aliases", ())}
        matched: set[str] = set()
        for field in old["fields"]:
            name = field["name"]
            here = f"{path}.{name}"
            counterpart = new_by_name.get(name) or new_by_alias.get(name)
            if counterpart is None:
                self.problems.append(f"{here}: field removed or renamed without an alias")
                continue
            matched.add(counterpart["name"])
            if counterpart["name"] != name and "default" not in field:
                self.problems.append(
                    f"{here}: renamed to {counterpart['name']}, but readers of the old "
                    "schema need a default for it"
                )
            self.compare(field["type"], counterpart["type"], here)
        for field in new["fields"]:
            if field["name"] not in matched and "default" not in field:
                self.problems.append(f"{path}.{field['name']}: field added without a default")

    def _compare_enums(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        added = [s for s in new["symbols"] if s not in old["symbols"]]
        removed = [s for s in old["symbols"] if s not in new["symbols"]]
        if added and "default" not in old:
            self.problems.append(
                f"{path}: enum {old['name']} gained symbols {added} but has no default "
                "for older readers to fall back on"
            )
        if removed and "default" not in new:
            self.problems.append(
                f"{path}: enum {new['name']} lost symbols {removed} and has no default "
                "for reading older data"
            )


def check_compatible(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Problems that stop `new` being backward and forward compatible with `old` (none: [])."""
    resolver = _Resolver(old, new)
    resolver.compare(old, new, old.get("name", "schema"))
    return resolver.problems
