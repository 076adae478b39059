"""The records the agent emits besides events: a run's output, dead letters, approval requests.

Each is a typed, frozen model that a `Step` carries; `to_json()` is its one serialisation,
called where the record is emitted. The JSON is the format users read (fields in this
order, `ensure_ascii=False`), so it must not change; the job's secret values and anything
shaped like a secret (a model that repeats a tool's token, an input that holds a password)
are redacted there, by the job's `Redactor` (`AgentConfig.redactor`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from streamagents.operators.agent.records import ErrorInfo
from streamagents.serde.chat import AnsweredBy, TokenUsage
from streamagents.serde.messages import MediaRef, Part
from streamagents.serde.safe_text import redact_secrets

__all__ = ["ApprovalRequest", "DeadLetter", "OutputRecord", "dead_letter_record"]


class _EmittedRecord(BaseModel):
    """A record emitted as one line of JSON."""

    model_config = ConfigDict(frozen=True)

    def to_json(self, redact: Callable[[str], str] = redact_secrets) -> str:
        """The record as emitted: its fields in order, non-ASCII text kept as is, secrets
        redacted by `redact` (the job's `Redactor`; by default, secret shapes)."""
        return redact(json.dumps(self.model_dump(), ensure_ascii=False))


class OutputRecord(_EmittedRecord):
    """What a finished run emits on the main output: its answer or its error, and usage."""

    id: str = Field(description="The input's id.")
    key: str = Field(description="The key the input had.")
    run_id: str = Field(description="The run's id.")
    status: Literal["ok", "error"] = Field(description="ok: answered; error: see `error`.")
    text: str = Field(default="", description="The answer's text (empty on error).")
    parts: list[Part] = Field(
        default_factory=list, description="The answer's parts when it has media, else empty."
    )
    error: ErrorInfo | None = Field(default=None, description="Why the run failed, if it did.")
    usage: TokenUsage = Field(description="Tokens the run used, over all its model calls.")
    model_calls: int = Field(description="Model calls the run made.")
    tool_calls: int = Field(description="Tool calls the run made.")
    latency_ms: int = Field(description="From the run's start to its end.")
    attributes: dict[str, Any] = Field(description="The input's pass-through fields.")
    answered_by: AnsweredBy | None = Field(
        default=None,
        description="The model that gave the run's last reply (provider, model, whether a "
        "fallback); None when no model answered.",
    )
    cost_usd: float | None = Field(
        default=None,
        description="What the run's model calls cost in US dollars (None: a call's model has "
        "no price).",
    )
    call_costs_usd: list[float | None] = Field(
        default_factory=list, description="The cost of each answered model call, in order."
    )

    @field_serializer("parts")
    def _parts_as_json(self, parts: list[Part]) -> list[dict[str, Any]]:
        return [part.model_dump(mode="json") for part in parts]

    @field_serializer("error")
    def _error_without_nones(self, error: ErrorInfo | None) -> dict[str, Any] | None:
        return None if error is None else error.model_dump(exclude_none=True)


class DeadLetter(_EmittedRecord):
    """A record that could not be processed: where it failed, why, and the input as received.

    Every dead letter is built by `build`, so none lacks its input."""

    stage: str = Field(description="Where it failed: parse, run, queue, approval, followup.")
    error_type: str = Field(description="The error class, e.g. InvalidJson, BadRequest.")
    reason: str = Field(description="What happened, for a person (no secrets, no bytes).")
    key: str | None = Field(default=None, description="The key, when known.")
    id: str | None = Field(default=None, description="The record's id, when known.")
    input: str = Field(description="The input line as received.")
    offloaded: dict[str, MediaRef] | None = Field(
        default=None,
        description="Refs of what the record holds only a prefix or a decoding of: `input` "
        "when the line was not UTF-8 (its exact bytes), or over the sink's limit.",
    )

    @classmethod
    def build(
        cls,
        stage: str,
        error: ErrorInfo,
        received: str,
        *,
        key: str | None = None,
        record_id: str | None = None,
        received_bytes: MediaRef | None = None,
    ) -> DeadLetter:
        """The dead letter of `received` (the whole line: a caller whose run kept it in the
        media store reads it back first); `record_id` defaults to the id the line gives;
        `received_bytes` is the ref of the line's exact bytes when `received` decodes them
        with replacements."""
        return cls(
            stage=stage,
            error_type=error.type,
            reason=error.message,
            key=key,
            id=record_id if record_id is not None else _given_id(received),
            input=received,
            offloaded=None if received_bytes is None else {"input": received_bytes},
        )

    def to_json(self, redact: Callable[[str], str] = redact_secrets) -> str:
        """The record as emitted (`offloaded` only when set), secrets redacted by `redact`;
        a lone surrogate in the input as received is escaped."""
        letter = self.model_dump(exclude={"offloaded"})
        if self.offloaded is not None:
            letter["offloaded"] = {
                name: ref.model_dump(mode="json", exclude_none=True)
                for name, ref in self.offloaded.items()
            }
        text = json.dumps(letter, ensure_ascii=False)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in the line as received: escape it
                text = json.dumps(letter)
        return redact(text)


class ApprovalRequest(_EmittedRecord):
    """What a person needs to decide on a tool call that waits for approval."""

    call_id: str = Field(description="The id a decision names (the call's tool_request event).")
    tool_call_id: str = Field(description="The model's id of the call.")
    run_id: str = Field(description="The run that waits.")
    input_id: str = Field(description="The input the run answers.")
    key: str = Field(description="The run's key (a decision must carry it).")
    tool: str = Field(description="The tool the model wants to call.")
    arguments: dict[str, Any] = Field(description="The arguments it wants to call it with.")
    text: str = Field(description="What the model said in the run so far, one line per reply.")
    requested_ms: int = Field(description="When the approval was asked for.")
    deadline_ms: int = Field(description="When the call is rejected without a decision.")


def dead_letter_record(
    stage: str,
    error: ErrorInfo,
    received: str,
    *,
    key: str | None = None,
    record_id: str | None = None,
    received_bytes: MediaRef | None = None,
    redact: Callable[[str], str] = redact_secrets,
) -> str:
    """The JSON of `DeadLetter.build(...)`, secrets redacted by `redact`, for a caller that
    emits it at once."""
    return DeadLetter.build(
        stage, error, received, key=key, record_id=record_id, received_bytes=received_bytes
    ).to_json(redact)


def _given_id(received: str) -> str | None:
    """The id a received line gives, when one can be read from it (it may not parse)."""
    try:
        obj = json.loads(received)
    except (TypeError, ValueError, RecursionError):
        return None
    record_id = obj.get("id") if isinstance(obj, dict) else None
    return record_id if isinstance(record_id, str) else None
