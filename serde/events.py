"""Agent events: what the event log records about every step of an agent run.

An `AgentEvent` is one step (input received, model request and response, tool request and
response, output, error, ...) with its identity (event id, job, key, run, sequence number,
the event it follows) and a typed `EventPayload`. Media appear in events only as store
references or URLs, never as bytes: a message holding inline media is refused, so callers
offload it to the media store (`MediaStore.offload`) before they log it.

Events travel between Flink operators as JSON (`event.model_dump_json()`) and are written
to the Avro event log by `streamagents.serde.avro`. The agent runtime makes its events as
`RunEvent`s: the same fields without validation, turned into an `AgentEvent` or JSON only
where one is needed (a side output, telemetry).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from enum import Enum
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from streamagents.serde.chat import ServerToolEvidence, TokenUsage
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = [
    "AgentEvent",
    "EventPayload",
    "EventType",
    "RunEvent",
    "RunPayload",
    "new_event",
]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class EventType(str, Enum):
    """What happened; `unknown` is what an older reader sees for a type it does not know."""

    UNKNOWN = "unknown"
    INPUT = "input"
    CHAT_REQUEST = "chat_request"
    CHAT_RESPONSE = "chat_response"
    TOOL_REQUEST = "tool_request"
    TOOL_RESPONSE = "tool_response"
    OUTPUT = "output"
    ERROR = "error"
    MEMORY_TRIMMED = "memory_trimmed"
    BUDGET_EXCEEDED = "budget_exceeded"
    SERVER_TOOL = "server_tool"
    CONTEXT_CACHE = "context_cache"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    APPROVAL_EXPIRED = "approval_expired"
    FOLLOWUP_SCHEDULED = "followup_scheduled"
    FOLLOWUP_FIRED = "followup_fired"
    FOLLOWUP_CANCELLED = "followup_cancelled"


def _refuse_inline_media(messages: list[ChatMessage], field: str) -> list[ChatMessage]:
    for index, message in enumerate(messages):
        for part_index, part in enumerate(message.media):
            if part.data is not None:
                raise ValueError(
                    f"{field}[{index}].parts[{part_index}]: {part.kind} part ({part.mime_type}, "
                    f"{len(part.data)} bytes) holds inline data; events carry media only as "
                    "store refs or URLs, so offload it first (MediaStore.offload)"
                )
    return messages


class EventPayload(BaseModel):
    """What an event carries; each event type fills the fields that apply to it."""

    model_config = _MODEL_CONFIG

    messages: list[ChatMessage] = Field(
        default_factory=list, description="Messages of the step: input, request or answer."
    )
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="Tool calls requested, with provider metadata."
    )
    tool_results: list[ChatMessage] = Field(
        default_factory=list, description="Tool-result messages (role tool, with is_error)."
    )
    usage: TokenUsage | None = Field(default=None, description="Tokens the model call used.")
    model: str | None = Field(default=None, description="Model name, e.g. gemini-2.5-flash.")
    latency_ms: float | None = Field(default=None, ge=0, description="Wall time of the step.")
    error_class: str | None = Field(default=None, description="Class name of the error.")
    error_message: str | None = Field(default=None, description="What went wrong.")
    finish_reason: str | None = Field(default=None, description="Provider's finish reason.")
    attempts: int | None = Field(default=None, ge=0, description="Provider attempts (retries).")
    cost_usd: float | None = Field(default=None, ge=0, description="Estimated cost in USD.")
    attributes: dict[str, str] = Field(
        default_factory=dict, description="Small free-form facts, e.g. the input id."
    )
    interaction_id: str | None = Field(
        default=None, description="The stored interaction a model reply can be continued from."
    )
    continued_from: str | None = Field(
        default=None,
        description="The stored interaction the model request continued (None: all sent).",
    )
    evidence: list[ServerToolEvidence] = Field(
        default_factory=list,
        description="What built-in server-side tools did for the model reply it follows.",
    )

    @field_validator("messages")
    @classmethod
    def _messages_without_bytes(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        return _refuse_inline_media(value, "messages")

    @field_validator("tool_results")
    @classmethod
    def _tool_results_without_bytes(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        for index, message in enumerate(value):
            if message.role != "tool":
                raise ValueError(f"tool_results[{index}]: role must be tool, not {message.role}")
        return _refuse_inline_media(value, "tool_results")


class AgentEvent(BaseModel):
    """One step of an agent run, as recorded in the event log."""

    model_config = _MODEL_CONFIG

    event_id: str = Field(default_factory=lambda: str(uuid.uuid4()), description="Unique id.")
    event_type: EventType = Field(description="What happened.")
    job_id: str = Field(description="The job that produced the event.")
    key: str | None = Field(default=None, description="The key the run belongs to.")
    run_id: str | None = Field(default=None, description="The agent run, when there is one.")
    sequence: int = Field(default=0, ge=0, description="Position of the event in its run.")
    timestamp_ms: int = Field(
        default_factory=lambda: time.time_ns() // 1_000_000,
        description="When the event happened, in milliseconds since the Unix epoch (UTC).",
    )
    upstream_event_id: str | None = Field(default=None, description="The event this follows.")
    payload: EventPayload = Field(default_factory=EventPayload, description="What it carries.")


def new_event(
    event_type: EventType | str,
    *,
    job_id: str,
    key: str | None,
    run_id: str | None,
    sequence: int,
    upstream_event_id: str | None = None,
    timestamp_ms: int | None = None,
    event_id: str | None = None,
    **payload: Any,
) -> AgentEvent:
    """Build an event (a fresh id unless `event_id` is given); other keywords fill the payload."""
    fields: dict[str, Any] = {
        "event_type": event_type,
        "job_id": job_id,
        "key": key,
        "run_id": run_id,
        "sequence": sequence,
        "upstream_event_id": upstream_event_id,
        "payload": EventPayload(**payload),
    }
    if timestamp_ms is not None:
        fields["timestamp_ms"] = timestamp_ms
    if event_id is not None:
        fields["event_id"] = event_id
    return AgentEvent(**fields)


_PAYLOAD_FIELDS = frozenset(EventPayload.model_fields)
_EVENT_TYPES = {kind.value: kind for kind in EventType}  # a member finds itself too


class RunPayload:
    """The payload of a `RunEvent`: the `EventPayload` fields given, the rest at their
    defaults (read-only empty ones), without validation."""

    messages: Sequence[ChatMessage] = ()
    tool_calls: Sequence[ToolCall] = ()
    tool_results: Sequence[ChatMessage] = ()
    usage: TokenUsage | None = None
    model: str | None = None
    latency_ms: float | None = None
    error_class: str | None = None
    error_message: str | None = None
    finish_reason: str | None = None
    attempts: int | None = None
    cost_usd: float | None = None
    attributes: Mapping[str, str] = MappingProxyType({})
    interaction_id: str | None = None
    continued_from: str | None = None
    evidence: Sequence[ServerToolEvidence] = ()

    def __init__(self, fields: dict[str, Any]) -> None:
        if not _PAYLOAD_FIELDS.issuperset(fields):
            unknown = ", ".join(sorted(fields.keys() - _PAYLOAD_FIELDS))
            raise TypeError(f"event payload has no field(s) {unknown}")
        self.__dict__.update(fields)

    def fields(self) -> dict[str, Any]:
        """The fields that were given."""
        return dict(self.__dict__)


_IDENTITY = ("event_id", "job_id", "key", "run_id", "sequence", "timestamp_ms", "upstream_event_id")


def _identity(event: AgentEvent | RunEvent) -> dict[str, Any]:
    """The fields of an event that say which it is and where it belongs."""
    return {name: getattr(event, name) for name in _IDENTITY}


class RunEvent:
    """An event of an agent run as the runtime makes it, for the event log and telemetry.

    It has the attributes of an `AgentEvent` but is built without pydantic: the runtime's
    inputs are typed already (messages offloaded, counts from the run), and a step's events
    are made on the task thread, where every microsecond is taken from throughput. The
    event log encodes it as it is (`streamagents.serde.avro.to_record`); `model()` gives the
    validated `AgentEvent` and `json()` its JSON text where a string is needed."""

    __slots__ = (
        "event_id",
        "event_type",
        "job_id",
        "key",
        "payload",
        "run_id",
        "sequence",
        "timestamp_ms",
        "upstream_event_id",
    )

    def __init__(
        self,
        event_type: EventType | str,
        *,
        event_id: str,
        job_id: str,
        key: str | None,
        run_id: str | None,
        sequence: int,
        timestamp_ms: int,
        upstream_event_id: str | None,
        **payload: Any,
    ) -> None:
        self.event_type = _EVENT_TYPES.get(event_type) or EventType(event_type)  # or ValueError
        self.event_id = event_id
        self.job_id = job_id
        self.key = key
        self.run_id = run_id
        self.sequence = sequence
        self.timestamp_ms = timestamp_ms
        self.upstream_event_id = upstream_event_id
        self.payload = RunPayload(payload)

    @classmethod
    def of(cls, event: AgentEvent) -> RunEvent:
        """The `RunEvent` of an `AgentEvent`, with the payload fields it set (for tests and
        benchmarks that compare the two forms)."""
        payload = event.payload
        fields = {name: getattr(payload, name) for name in payload.model_fields_set}
        return cls(event.event_type, **_identity(event), **fields)

    def model(self) -> AgentEvent:
        """The validated `AgentEvent` (a ValidationError when a field is not valid)."""
        return new_event(self.event_type, **_identity(self), **self.payload.fields())

    def json(self) -> str:
        """The JSON text of the event, as `AgentEvent.model_dump_json()` gives it."""
        return self.model().model_dump_json()

    def __repr__(self) -> str:
        return f"RunEvent({self.event_type.value}, {self.event_id!r})"
