"""Input parsing: from one input line to an `InputRecord`, or an `InputError` naming the rule
it broke; and `ErrorInfo`, why a run or a call failed. (The records the agent emits are in
`emitted_records`.)

An input record is one JSON object (one JSONL line) of strict JSON within `InputLimits`,
with an optional `id` (else the sha256 of the raw line, which the engine numbers by its
position among its key's inputs without an id, see `numbered`), the key at a dotted path,
`text` and/or `parts` (together the user message), and any other fields, kept as
`attributes`. `check_media_sources` refuses media that point where the source may not
(the job's parse step applies it once, before it moves large inline media to the store).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from itertools import accumulate
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.config import InputLimits, InputMedia
from streamagents.operators.agent.followups import is_followup_line
from streamagents.operators.agent.replay import (
    REPLAY_OF_FIELD,
    REPLAY_TOOLS_FIELD,
    RecordedToolCall,
)
from streamagents.serde.messages import ChatMessage, Part, TextPart
from streamagents.serde.safe_text import clip

__all__ = [
    "ErrorInfo",
    "InputError",
    "InputRecord",
    "check_media_sources",
    "decode_line",
    "key_of",
    "not_a_followup",
    "numbered",
    "offload_input",
    "parse_input",
]

_DIGEST_FIELD = "_input_sha256"
"""Where the parse step keeps the sha256 of an id-less line whose media it moved."""
_RESERVED = ("id", "text", "parts", _DIGEST_FIELD, REPLAY_OF_FIELD, REPLAY_TOOLS_FIELD)
_DEFAULT_LIMITS = InputLimits()
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_HEX = re.compile(r"[0-9a-f]{64}")
_PARTS: TypeAdapter[list[Any]] = TypeAdapter(list[Part])
_RECORDED_TOOLS: TypeAdapter[list[RecordedToolCall]] = TypeAdapter(list[RecordedToolCall])


class InputError(ValueError):
    """An input record that cannot become a run; the message says which rule it broke."""

    def __init__(self, message: str, error_type: str = "InvalidInput") -> None:
        super().__init__(message)
        self.error_type = error_type


class ErrorInfo(BaseModel):
    """Why a run or a call failed: an error type and a message without secrets or bytes."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(description='Error class, e.g. "BudgetExceeded", "RateLimited".')
    message: str = Field(description="What happened, for a person.")
    budget: str | None = Field(default=None, description="The budget that was hit, if any.")
    limit: float | None = Field(default=None, description="That budget's limit.")

    @classmethod
    def from_exception(cls, error: BaseException) -> ErrorInfo:
        """Its `error_type` (else its class name) and its message, clipped."""
        error_type = getattr(error, "error_type", None) or type(error).__name__
        return cls(type=error_type, message=clip(str(error)))


class InputRecord(BaseModel):
    """A parsed input: its id, key, user message, pass-through attributes and the raw line."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="The input's id (given, or the sha256 of the raw line).")
    id_given: bool = Field(
        default=True, description="Whether the line gave its id (else the engine numbers it)."
    )
    key: str = Field(description="The key value, as text.")
    message: ChatMessage = Field(description="The user message made of text and parts.")
    attributes: dict[str, Any] = Field(default_factory=dict, description="Other fields.")
    raw: str = Field(description="The input line as given.")
    replay_of: str | None = Field(
        default=None, description="A replay line's recorded run (`_replay_of`)."
    )
    recorded_tools: list[RecordedToolCall] = Field(
        default_factory=list, description="A replay line's recorded tool calls (`_replay_tools`)."
    )


def _lookup(obj: dict[str, Any], dotted: str) -> Any:
    current: Any = obj
    for step in dotted.split("."):
        if not isinstance(current, dict) or step not in current:
            raise InputError(f"key field {dotted!r} is missing", "MissingKey")
        current = current[step]
    return current


def _parts_errors(exc: ValidationError) -> str:
    """Where each part is invalid and why, never the input values."""
    return "; ".join(
        f"{'.'.join(str(p) for p in ('parts', *err['loc']))}: {err['msg']}"
        for err in exc.errors(include_input=False, include_url=False)
    )


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError(
            "input holds a number too large for a 64-bit float; strict JSON numbers are finite",
            "InvalidNumber",
        )
    return value


def _refuse_constant(name: str) -> Any:
    raise InputError(
        f"input holds {name}, which strict JSON does not allow; numbers must be finite",
        "InvalidNumber",
    )


_STRICT_JSON = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
"""Built once: `json.loads` with hooks builds a decoder per call."""


def _line_size(raw: str) -> int:
    """The line's UTF-8 size; a lone surrogate character in it is refused."""
    if raw.isascii():
        return len(raw)
    try:
        return len(raw.encode("utf-8"))
    except UnicodeEncodeError:
        raise InputError(
            "input line holds a lone surrogate character, which is not valid Unicode text",
            "InvalidText",
        ) from None


def _depth(raw: str) -> int:
    """How deep objects and lists nest in a JSON text, without recursion (strings skipped)."""
    brackets = _BRACKETS.findall(_STRINGS.sub("", raw))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def _surrogate_field(obj: Any) -> str | None:
    """The dotted path of the first value or field name holding a lone surrogate, if any."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(obj, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = ((str(i), v) for i, v in enumerate(value))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return ".".join(path) or "the input"
            continue
        else:
            continue
        for name, item in items:
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                return "a field name" + (f" in {'.'.join(path)}" if path else "")
            stack.append((item, (*path, name)))
    return None


def _load(raw: str, limits: InputLimits) -> tuple[Any, int]:
    """The line's JSON value and UTF-8 size, checked against the limits and strict JSON."""
    size = _line_size(raw)
    if size > limits.max_line_bytes:
        raise InputError(
            f"input line is {size} bytes, over max_line_bytes={limits.max_line_bytes}",
            "InputTooLarge",
        )
    # json.loads recurses once per level: a line nested deeper than the interpreter allows
    # would raise RecursionError (here and in every later step), so deep lines are refused
    # before it runs. Only a line with more brackets than the limit can be that deep.
    if raw.count("[") + raw.count("{") > limits.max_depth and _depth(raw) > limits.max_depth:
        raise InputError(_too_deep(limits.max_depth), "InputTooDeep")
    try:
        obj = _STRICT_JSON.decode(raw)
    except InputError:
        raise
    except RecursionError:
        raise InputError(_too_deep(limits.max_depth), "InputTooDeep") from None
    except (ValueError, TypeError) as exc:
        where = f" at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        raise InputError(f"input is not valid JSON{where}", "InvalidJson") from None
    if _SURROGATE_ESCAPE.search(raw) is not None:
        field = _surrogate_field(obj)
        if field is not None:
            raise InputError(
                clip(
                    f"{field} holds a lone surrogate escape (\\ud800-\\udfff without its "
                    "pair), which is not valid Unicode text"
                ),
                "InvalidText",
            )
    return obj, size


def _too_deep(max_depth: int) -> str:
    return f"input nests deeper than {max_depth} levels (max_depth)"


def decode_line(raw: str, limits: InputLimits | None = None) -> tuple[Any, int]:
    """The JSON value of an input line and its UTF-8 size, checked against `limits` and
    strict JSON; raises `InputError` naming the broken rule."""
    return _load(raw, limits or _DEFAULT_LIMITS)


def key_of(obj: dict[str, Any], key_field: str, limits: InputLimits | None = None) -> str:
    """The key of a decoded input object as text; raises `InputError` when it is missing,
    not a string or number, or longer than `limits.max_key_chars`."""
    limits = limits or _DEFAULT_LIMITS
    key = _lookup(obj, key_field)
    if isinstance(key, bool) or not isinstance(key, str | int | float):
        raise InputError(
            f"key field {key_field!r} must be a string or a number, not {type(key).__name__}",
            "InvalidKey",
        )
    key_text = str(key)
    if len(key_text) > limits.max_key_chars:
        raise InputError(
            f"key field {key_field!r} is {len(key_text)} characters, over "
            f"max_key_chars={limits.max_key_chars}",
            "InvalidKey",
        )
    return key_text


def parse_input(
    raw: str,
    key_field: str,
    limits: InputLimits | None = None,
    *,
    decoded: tuple[Any, int] | None = None,
) -> InputRecord:
    """Parse one input line; raises `InputError` naming the broken rule (never the payload).

    `limits` bound the line (defaults: `InputLimits()`); the line must be strict JSON:
    no NaN or infinite numbers, no lone surrogates. `decoded` is what `decode_line` gave
    for this line, when the caller has it already.
    """
    limits = limits or _DEFAULT_LIMITS
    obj, size = decoded if decoded is not None else _load(raw, limits)
    if not isinstance(obj, dict):
        raise InputError(f"input must be a JSON object, not {type(obj).__name__}", "InvalidJson")
    key_text = key_of(obj, key_field, limits)
    record_id = obj.get("id")
    id_given = record_id is not None
    if not id_given:
        digest = obj.get(_DIGEST_FIELD)
        record_id = digest if _is_digest(digest) else hashlib.sha256(raw.encode()).hexdigest()
    elif not isinstance(record_id, str) or not record_id:
        raise InputError("id must be a non-empty string when present", "InvalidId")
    text = obj.get("text")
    parts = obj.get("parts")
    if text is not None and not isinstance(text, str):
        raise InputError(f"text must be a string, not {type(text).__name__}")
    if parts is not None and not isinstance(parts, list):
        raise InputError(f"parts must be a list of part objects, not {type(parts).__name__}")
    if not text and not parts:
        raise InputError("input has neither text nor parts: nothing to send to the agent")
    try:
        media = _PARTS.validate_python(parts or [])
    except ValidationError as exc:
        raise InputError(f"invalid part: {_parts_errors(exc)}", "InvalidPart") from None
    if media:
        message = ChatMessage(role="user", parts=([TextPart(text=text)] if text else []) + media)
    else:
        message = ChatMessage(role="user", content=text or "")
    top_key = None if "." in key_field else key_field  # a nested key's parent object stays
    attributes = {k: v for k, v in obj.items() if k not in _RESERVED and k != top_key}
    if attributes and size > limits.max_attributes_bytes:  # else they cannot be over it
        kept = len(json.dumps(attributes, ensure_ascii=False).encode())
        if kept > limits.max_attributes_bytes:
            raise InputError(
                f"the pass-through fields are {kept} bytes of JSON, over "
                f"max_attributes_bytes={limits.max_attributes_bytes}",
                "InputTooLarge",
            )
    replay_of, recorded_tools = _replay_fields(obj)
    return InputRecord(
        id=record_id,
        id_given=id_given,
        key=key_text,
        message=message,
        attributes=attributes,
        raw=raw,
        replay_of=replay_of,
        recorded_tools=recorded_tools,
    )


def check_media_sources(record: InputRecord, allowed: InputMedia) -> None:
    """Refuse a record whose media point where its source may not point (`InputMedia`):
    raises `InputError` (`MediaSourceRefused`) naming the part and the rule."""
    for index, part in enumerate(record.message.media):
        refusal = allowed.refusal(part.source, part.url)
        if refusal is not None:
            raise InputError(f"part {index}: {refusal}", "MediaSourceRefused")


def _replay_fields(obj: dict[str, Any]) -> tuple[str | None, list[RecordedToolCall]]:
    """A replay line's recorded run id and tool calls (see `replay`); none on other lines."""
    replay_of = obj.get(REPLAY_OF_FIELD)
    tools = obj.get(REPLAY_TOOLS_FIELD)
    if replay_of is None and tools is None:
        return None, []
    if not isinstance(replay_of, str) or not replay_of:
        raise InputError(f"{REPLAY_OF_FIELD} must be a non-empty string", "InvalidReplayLine")
    try:
        return replay_of, _RECORDED_TOOLS.validate_python(tools or [])
    except ValidationError:
        raise InputError(
            f"{REPLAY_TOOLS_FIELD} must be a list of recorded tool calls (name, arguments, result)",
            "InvalidReplayLine",
        ) from None


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.fullmatch(value) is not None


def numbered(record: InputRecord, position: int) -> InputRecord:
    """The record as the engine runs it: without a given id, its id is `<sha256>-<position>`.

    `position` counts the inputs without an id its key had before it, so identical lines
    get distinct ids, and a replay in the same order (from a checkpoint, whose state holds
    the count) gives the same ones. A record with a given id comes back unchanged.
    """
    if record.id_given:
        return record
    return record.model_copy(update={"id": f"{record.id}-{position}"})


def offload_input(record: InputRecord, store: MediaStore, threshold_bytes: int) -> str:
    """The record's input line with its inline media above the threshold put in `store`.

    The media go through `MediaStore.offload`; each entry of `parts` it moved keeps its
    fields but has its `data` replaced by the `ref`, and a line without an id carries its
    digest explicitly under `_input_sha256` (the sha256 of the line as given, which the new
    line no longer is); every other field stays as given. A line without such media comes
    back unchanged.
    """
    offloaded = store.offload(record.message, threshold_bytes)
    if offloaded is record.message:
        return record.raw
    obj = json.loads(record.raw)
    given = obj["parts"]
    # parse_input puts the `text` part (if any) before the parts as given, in their order,
    # and offload copies only the parts it moved.
    moved = zip(record.message.parts[-len(given) :], offloaded.parts[-len(given) :], strict=True)
    for index, (before, after) in enumerate(moved):
        if after is not before:
            kept = {k: v for k, v in given[index].items() if k != "data"}
            given[index] = {**kept, "ref": after.ref.model_dump(mode="json", exclude_none=True)}
    if record.id_given:
        obj["id"] = record.id
    else:
        obj[_DIGEST_FIELD] = record.id
    return json.dumps(obj, ensure_ascii=False)


def not_a_followup(line: str, record: InputRecord) -> str:
    """An input line as the parse step passes it on: never one that starts like the engine's
    follow-up lines (`is_followup_line`). Such a line gets its `followup` field moved to the
    end, and without an id the sha256 of the line as given under `_input_sha256` (its id
    stays); any other line comes back unchanged."""
    if not is_followup_line(line):
        return line
    obj = json.loads(line)
    followup = obj.pop("followup")
    if not record.id_given:
        obj[_DIGEST_FIELD] = record.id
    obj["followup"] = followup
    return json.dumps(obj, ensure_ascii=False)
