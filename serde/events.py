"""Agent events: what the event log records about every step of an agent run.

An `AgentEvent` is one step (input received, model request and response, tool request and
response, output, error, ...) with its identity (event id, job, key, run, sequence number,
the event it follows) and its payload: the model of its event type
(`streamagents.serde.event_payloads`), whose kind is the event's `event_type`. Media appear
in events only as store references or URLs, never as bytes: a message holding inline media
is refused, so callers offload it to the media store (`MediaStore.offload`) before they
log it.

Events travel between Flink operators as JSON (`event.model_dump_json()`) and are written
to the Avro event log by `streamagents.serde.avro`, both with the payload in its stored
form (`streamagents.serde.event_storage`): the JSON text is the same as before payloads
were typed, and JSON in that form is read into the typed payload. The agent runtime makes
its events as `RunEvent`s: the payload model its emitter built with the identity unchecked,
turned into an `AgentEvent` or JSON only where one is needed (a side output, telemetry).
"""

from __future__ import annotations

import time
import uuid
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator
from typing_extensions import TypedDict  # pydantic reads it on Python < 3.12

from streamagents.serde.event_payloads import EventPayload
from streamagents.serde.event_storage import StoredPayload, stored_payload, typed_fields

__all__ = [
    "AgentEvent",
    "EventType",
    "RunEvent",
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
    BUDGET_DEFERRED = "budget_deferred"


class StoredEvent(TypedDict):
    """An event as its JSON text has it: the payload in the stored form."""

    event_id: str
    event_type: EventType
    job_id: str
    key: str | None
    run_id: str | None
    sequence: int
    timestamp_ms: int
    upstream_event_id: str | None
    payload: StoredPayload


class AgentEvent(BaseModel):
    """One step of an agent run, as recorded in the event log."""

    model_config = _MODEL_CONFIG

    event_id: str = Field(default_factory=lambda: str(uuid.uuid4()), description="Unique id.")
    job_id: str = Field(description="The job that produced the event.")
    key: str | None = Field(default=None, description="The key the run belongs to.")
    run_id: str | None = Field(default=None, description="The agent run, when there is one.")
    sequence: int = Field(default=0, ge=0, description="Position of the event in its run.")
    timestamp_ms: int = Field(
        default_factory=lambda: time.time_ns() // 1_000_000,
        description="When the event happened, in milliseconds since the Unix epoch (UTC).",
    )
    upstream_event_id: str | None = Field(default=None, description="The event this follows.")
    payload: EventPayload = Field(description="What it carries: the model of its event type.")

    @property
    def event_type(self) -> EventType:
        """What happened: the kind of its payload."""
        return _EVENT_TYPES[self.payload.kind]

    @model_validator(mode="before")
    @classmethod
    def _typed_payload(cls, data: Any) -> Any:
        """An `event_type` and a payload in the stored form (as the JSON text has them) or
        as the fields of its model, made into the payload model of that type."""
        if not isinstance(data, dict) or "event_type" not in data:
            return data
        data = dict(data)
        kind = _event_type(data.pop("event_type")).value
        payload = data.get("payload")
        if isinstance(payload, BaseModel):
            if getattr(payload, "kind", None) != kind:
                raise ValueError(f"a {kind} event cannot carry a {type(payload).__name__}")
        else:
            data["payload"] = {**typed_fields(kind, payload or {}), "kind": kind}
        return data

    @model_serializer(mode="plain")
    def _stored_form(self) -> StoredEvent:
        """The event with its payload in the stored form: what its JSON text holds."""
        kind = self.payload.kind
        return {
            "event_id": self.event_id,
            "event_type": _EVENT_TYPES[kind],
            "job_id": self.job_id,
            "key": self.key,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "timestamp_ms": self.timestamp_ms,
            "upstream_event_id": self.upstream_event_id,
            "payload": stored_payload(kind, self.payload),
        }


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
    """Build an event (a fresh id unless `event_id` is given); other keywords fill the payload:
    the fields of its type's payload model, or the stored form (`attributes` as text)."""
    fields: dict[str, Any] = {
        "event_type": event_type,
        "job_id": job_id,
        "key": key,
        "run_id": run_id,
        "sequence": sequence,
        "upstream_event_id": upstream_event_id,
        "payload": payload,
    }
    if timestamp_ms is not None:
        fields["timestamp_ms"] = timestamp_ms
    if event_id is not None:
        fields["event_id"] = event_id
    return AgentEvent(**fields)


_EVENT_TYPES = {kind.value: kind for kind in EventType}  # a member finds itself too


def _event_type(value: EventType | str) -> EventType:
    return _EVENT_TYPES.get(value) or EventType(value)  # or a ValueError naming it


_IDENTITY = ("event_id", "job_id", "key", "run_id", "sequence", "timestamp_ms", "upstream_event_id")


def _identity(event: AgentEvent | RunEvent) -> dict[str, Any]:
    """The fields of an event that say which it is and where it belongs."""
    return {name: getattr(event, name) for name in _IDENTITY}


class RunEvent:
    """An event of an agent run as the runtime makes it, for the event log and telemetry.

    It has the attributes of an `AgentEvent` and carries the payload model its emitter
    built (validated there), but its identity is not validated again: a step's events are
    made on the task thread, where every microsecond is taken from throughput, from the
    run's own ids and counts. The event log encodes it as it is
    (`streamagents.serde.avro.to_record`); `model()` gives the `AgentEvent` and `json()` its
    JSON text where a string is needed."""

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
        payload: EventPayload,
        *,
        event_id: str,
        job_id: str,
        key: str | None,
        run_id: str | None,
        sequence: int,
        timestamp_ms: int,
        upstream_event_id: str | None,
    ) -> None:
        self.event_type = _EVENT_TYPES[payload.kind]
        self.event_id = event_id
        self.job_id = job_id
        self.key = key
        self.run_id = run_id
        self.sequence = sequence
        self.timestamp_ms = timestamp_ms
        self.upstream_event_id = upstream_event_id
        self.payload = payload

    @classmethod
    def of(cls, event: AgentEvent) -> RunEvent:
        """The `RunEvent` of an `AgentEvent`, with its payload (for tests and benchmarks that
        compare the two forms)."""
        return cls(event.payload, **_identity(event))

    def model(self) -> AgentEvent:
        """The `AgentEvent` of the same identity and payload."""
        return AgentEvent(**_identity(self), payload=self.payload)

    def json(self) -> str:
        """The JSON text of the event, as `AgentEvent.model_dump_json()` gives it."""
        return self.model().model_dump_json()

    def __repr__(self) -> str:
        return f"RunEvent({self.event_type.value}, {self.event_id!r})"
