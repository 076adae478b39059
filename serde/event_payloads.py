"""What each kind of agent event carries: one frozen model per event type, numbers as numbers.

`EventPayload` is the discriminated union of the payload models on their `kind` (the event
type). Adding a kind of event is one class here, named in that union (with its symbol in
`EventType` and in the next schema version's enum); how its fields are stored follows from
their names and types (`streamagents.serde.event_storage`).

A field named like a field of the Avro record's payload (`messages`, `usage`, `model`...)
is stored there; any other field is one of the record's string `attributes`, under its own
name. The log's facts are strings, the payloads' are typed: `deadline_ms` is an int,
`edited_arguments` a bool, `tools` a list of names, `retries` a list of `RetryAttempt`.
Media appear in payloads only as store references or URLs, never as bytes: a message
holding inline media is refused, so callers offload it to the media store
(`MediaStore.offload`) before they log it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from streamagents.serde.chat import RetryAttempt, ServerToolEvidence, TokenUsage
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = [
    "PAYLOAD_MODELS",
    "ApprovalDecidedPayload",
    "ApprovalExpiredPayload",
    "ApprovalRequestedPayload",
    "BudgetDeferredPayload",
    "BudgetExceededPayload",
    "ChatRequestPayload",
    "ChatResponsePayload",
    "ContextCachePayload",
    "ErrorPayload",
    "EventPayload",
    "FollowupCancelledPayload",
    "FollowupFiredPayload",
    "FollowupScheduledPayload",
    "InputPayload",
    "MemoryTrimmedPayload",
    "OutputPayload",
    "ServerToolPayload",
    "ToolRequestPayload",
    "ToolResponsePayload",
    "UnknownPayload",
]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


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


def _tool_messages(value: list[ChatMessage]) -> list[ChatMessage]:
    for index, message in enumerate(value):
        if message.role != "tool":
            raise ValueError(f"tool_results[{index}]: role must be tool, not {message.role}")
    return _refuse_inline_media(value, "tool_results")


class _Payload(BaseModel):
    """What every payload has: facts of the stored attributes this model has no field for."""

    model_config = _MODEL_CONFIG

    extra_attributes: dict[str, str] = Field(
        default_factory=dict,
        description="Stored attributes this kind has no field for (a newer writer's, or a "
        "value that does not read as its field's type), kept as they were written.",
    )
    replay_of: str | None = Field(
        default=None, description="The recorded run this run replays (a replay's events only)."
    )

    @field_validator("messages", check_fields=False)
    @classmethod
    def _messages_without_bytes(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        return _refuse_inline_media(value, "messages")

    @field_validator("tool_results", check_fields=False)
    @classmethod
    def _tool_results_are_tool_messages(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        return _tool_messages(value)

    @property
    def attributes(self) -> dict[str, str]:
        """Its facts as the log stores them, as text (to show them, not to read them)."""
        from streamagents.serde.event_storage import stored_attributes  # it imports this

        return stored_attributes(self.kind, self)  # type: ignore[attr-defined]


def _messages(description: str) -> Any:
    return Field(default_factory=list, description=description)


class InputPayload(_Payload):
    """An input record began a run."""

    kind: Literal["input"] = "input"
    messages: list[ChatMessage] = _messages("The input as a user message (media as refs).")
    input_id: str | None = Field(default=None, description="The input record's id.")
    input_record: str | None = Field(
        default=None,
        description="The input line as received, media as store refs (v8; at `standard` a "
        "prefix, and `input_record_clipped` is set when read back).",
    )
    input_record_clipped: bool | None = Field(
        default=None, description="True when the log kept only a prefix of `input_record`."
    )
    key_sequence: int | None = Field(
        default=None, ge=0, description="The run's position among its key's runs (keyed state)."
    )
    config_fingerprint: str | None = Field(
        default=None,
        description="Hash of the system prompt, model, tools and generation settings it used.",
    )


class ChatRequestPayload(_Payload):
    """The run asked the model; the conversation so far is in the events before it."""

    kind: Literal["chat_request"] = "chat_request"
    messages: list[ChatMessage] = _messages("The request's messages, when it logs them.")
    model: str | None = Field(default=None, description="Model name, e.g. gemini-2.5-flash.")
    provider: str | None = Field(default=None, description="The provider, e.g. gemini.")
    tools: list[str] | None = Field(
        default=None, description="Names of the tools the model was offered (None: not told)."
    )


class ChatResponsePayload(_Payload):
    """The model answered, or its call failed (`error_class`)."""

    kind: Literal["chat_response"] = "chat_response"
    messages: list[ChatMessage] = _messages("The assistant message, with its tool calls.")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="Tool calls requested, with provider metadata."
    )
    usage: TokenUsage | None = Field(default=None, description="Tokens the model call used.")
    model: str | None = Field(default=None, description="Model that answered.")
    latency_ms: float | None = Field(default=None, ge=0, description="Wall time of the call.")
    error_class: str | None = Field(default=None, description="Class name of the error.")
    error_message: str | None = Field(default=None, description="What went wrong.")
    finish_reason: str | None = Field(default=None, description="Provider's finish reason.")
    attempts: int | None = Field(default=None, ge=0, description="Requests sent (retries).")
    cost_usd: float | None = Field(default=None, ge=0, description="Estimated cost in USD.")
    interaction_id: str | None = Field(
        default=None, description="The stored interaction the reply can be continued from."
    )
    continued_from: str | None = Field(
        default=None,
        description="The stored interaction the request continued (None: all was sent).",
    )
    continuation_fallback: str | None = Field(
        default=None, description="Why a continuation was asked for but all was sent."
    )
    cached_content: str | None = Field(
        default=None, description="The context cache the answered request referenced."
    )
    sources: int | None = Field(
        default=None, ge=0, description="Web sources the reply was grounded on, when any."
    )
    retries: list[RetryAttempt] = Field(
        default_factory=list, description="The failed attempts retried before the last one."
    )
    answered_provider: str | None = Field(
        default=None, description="Provider of the model that answered (v7 and later)."
    )
    fallback: bool | None = Field(
        default=None,
        description="Whether the model that answered is a fallback of a failover chain (v7).",
    )
    passed_over: list[str] | None = Field(
        default=None,
        description="Models of the chain that failed or were skipped before it "
        "(`provider/model`, in order).",
    )
    from_journal: bool | None = Field(
        default=None,
        description="True when the call journal answered the call (no request was sent).",
    )


class ToolRequestPayload(_Payload):
    """The model asked for a tool call."""

    kind: Literal["tool_request"] = "tool_request"
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="The call (one per event), with provider metadata."
    )
    mcp_server: str | None = Field(
        default=None, description="The MCP server the call went to (None: not an MCP tool)."
    )
    mcp_tool: str | None = Field(
        default=None, description="The tool's own name on that server (None: not an MCP tool)."
    )


class ToolResponsePayload(_Payload):
    """A tool call's result came in."""

    kind: Literal["tool_response"] = "tool_response"
    tool_results: list[ChatMessage] = _messages("Tool-result messages (role tool, is_error).")
    latency_ms: float | None = Field(
        default=None, ge=0, description="Wall time of the turn's calls (None: not run)."
    )
    mcp_server: str | None = Field(
        default=None, description="The MCP server the call went to (None: not an MCP tool)."
    )
    mcp_tool: str | None = Field(
        default=None, description="The tool's own name on that server (None: not an MCP tool)."
    )
    from_journal: bool | None = Field(
        default=None,
        description="True when the call journal answered the call (the tool did not run).",
    )


class OutputPayload(_Payload):
    """The run ended with an output record."""

    kind: Literal["output"] = "output"
    messages: list[ChatMessage] = _messages("The answer, when the run ended well.")
    usage: TokenUsage | None = Field(default=None, description="Tokens the run used, in all.")
    latency_ms: float | None = Field(default=None, ge=0, description="Wall time of the run.")
    input_id: str | None = Field(default=None, description="The input record's id.")
    status: str | None = Field(default=None, description="ok or error.")
    cost_usd: float | None = Field(
        default=None, ge=0, description="What the run's model calls cost in US dollars."
    )


class ErrorPayload(_Payload):
    """The run failed, or the log took a record it could not write (`InvalidEventRecord`)."""

    kind: Literal["error"] = "error"
    error_class: str | None = Field(default=None, description="Class name of the error.")
    error_message: str | None = Field(default=None, description="What went wrong.")
    input_id: str | None = Field(default=None, description="The input record's id.")
    record_length: int | None = Field(
        default=None, ge=0, description="Characters of the record the log refused."
    )


class BudgetExceededPayload(_Payload):
    """The run went over one of its budgets and was stopped."""

    kind: Literal["budget_exceeded"] = "budget_exceeded"
    error_class: str | None = Field(default=None, description="Class name of the error.")
    error_message: str | None = Field(default=None, description="What went wrong.")
    input_id: str | None = Field(default=None, description="The input record's id.")
    budget: str | None = Field(default=None, description="The budget, e.g. max_tool_calls.")
    limit: float | None = Field(
        default=None, description="Its limit (stored as Python's `g` format: 1e+06)."
    )


class BudgetDeferredPayload(_Payload):
    """The run's next model call waits for a spend budget's window to have room."""

    kind: Literal["budget_deferred"] = "budget_deferred"
    input_id: str | None = Field(default=None, description="The input record's id.")
    budget: str | None = Field(default=None, description="The budget, e.g. per_tenant.cost.")
    limit: float | None = Field(default=None, description="Its limit in this subtask.")
    window_s: float | None = Field(default=None, description="Its rolling window, in seconds.")
    until_ms: int | None = Field(
        default=None, description="When the window has room again (ms since the epoch)."
    )


class MemoryTrimmedPayload(_Payload):
    """The key's short-term memory was trimmed to its bounds when the run ended."""

    kind: Literal["memory_trimmed"] = "memory_trimmed"
    dropped_messages: int | None = Field(default=None, ge=0, description="Messages dropped.")
    dropped_bytes: int | None = Field(default=None, ge=0, description="Their JSON bytes.")
    kept_messages: int | None = Field(default=None, ge=0, description="Messages kept.")
    kept_bytes: int | None = Field(default=None, ge=0, description="Their JSON bytes.")


class ServerToolPayload(_Payload):
    """A built-in server-side tool worked for the model reply the event follows."""

    kind: Literal["server_tool"] = "server_tool"
    evidence: list[ServerToolEvidence] = Field(
        default_factory=list, description="What the tool did: queries, sources, code run."
    )


class ContextCachePayload(_Payload):
    """Something happened to the model's context cache (created, evicted, off...)."""

    kind: Literal["context_cache"] = "context_cache"
    action: str | None = Field(default=None, description="created, evicted, off, create_failed.")
    reason: str | None = Field(default=None, description="Why, in a sentence.")
    tokens: int | None = Field(default=None, ge=0, description="Tokens a created cache holds.")
    cache: str | None = Field(default=None, description="The cache's name, when it has one.")


class _ApprovalPayload(_Payload):
    """A person's decision on a tool call: what every approval event has."""

    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="The call the decision is about."
    )
    call_id: str | None = Field(
        default=None, description="The approval's id: the call's tool_request event id."
    )


class ApprovalRequestedPayload(_ApprovalPayload):
    """A tool call waits for a person's decision."""

    kind: Literal["approval_requested"] = "approval_requested"
    deadline_ms: int | None = Field(
        default=None, description="When it times out, in ms since the epoch."
    )


class ApprovalDecidedPayload(_ApprovalPayload):
    """A person approved or rejected a waiting tool call."""

    kind: Literal["approval_decided"] = "approval_decided"
    decision: str | None = Field(default=None, description="approve or reject.")
    by: str | None = Field(default=None, description="Who decided.")
    comment: str | None = Field(default=None, description="What they said.")
    edited_arguments: bool | None = Field(
        default=None, description="Whether an approval changed the call's arguments."
    )


class ApprovalExpiredPayload(_ApprovalPayload):
    """No decision came in time: the call was rejected as timed out."""

    kind: Literal["approval_expired"] = "approval_expired"
    deadline_ms: int | None = Field(
        default=None, description="When it timed out, in ms since the epoch."
    )


class FollowupScheduledPayload(_Payload):
    """The model scheduled a follow-up run of the conversation."""

    kind: Literal["followup_scheduled"] = "followup_scheduled"
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="The schedule_followup call."
    )
    followup_id: str | None = Field(default=None, description="The follow-up's id.")
    due_ms: int | None = Field(default=None, description="When it is due, ms since the epoch.")


class FollowupFiredPayload(_Payload):
    """A follow-up came due and began this run."""

    kind: Literal["followup_fired"] = "followup_fired"
    followup_id: str | None = Field(default=None, description="The follow-up's id.")
    scheduled_by: str | None = Field(default=None, description="The run that scheduled it.")
    due_ms: int | None = Field(default=None, description="When it was due, ms since the epoch.")
    input_id: str | None = Field(default=None, description="The input id of its run.")


class FollowupCancelledPayload(_Payload):
    """A new input cancelled a follow-up that waited for the key."""

    kind: Literal["followup_cancelled"] = "followup_cancelled"
    followup_id: str | None = Field(default=None, description="The follow-up's id.")
    due_ms: int | None = Field(default=None, description="When it was due, ms since the epoch.")
    cancelled_by: str | None = Field(default=None, description="The input that cancelled it.")


class UnknownPayload(BaseModel):
    """An event of a type this version does not know (a newer writer's): every stored field
    as it was written."""

    model_config = _MODEL_CONFIG

    kind: Literal["unknown"] = "unknown"
    messages: list[ChatMessage] = _messages("Messages of the step.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls.")
    tool_results: list[ChatMessage] = _messages("Tool-result messages.")
    usage: TokenUsage | None = Field(default=None, description="Tokens a model call used.")
    model: str | None = Field(default=None, description="Model name.")
    latency_ms: float | None = Field(default=None, ge=0, description="Wall time of the step.")
    error_class: str | None = Field(default=None, description="Class name of the error.")
    error_message: str | None = Field(default=None, description="What went wrong.")
    finish_reason: str | None = Field(default=None, description="Provider's finish reason.")
    attempts: int | None = Field(default=None, ge=0, description="Provider attempts.")
    cost_usd: float | None = Field(default=None, ge=0, description="Estimated cost in USD.")
    attributes: dict[str, str] = Field(default_factory=dict, description="Its facts, as text.")
    interaction_id: str | None = Field(default=None, description="A stored interaction.")
    continued_from: str | None = Field(default=None, description="The one it continued.")
    evidence: list[ServerToolEvidence] = Field(
        default_factory=list, description="What built-in server-side tools did."
    )
    answered_provider: str | None = Field(default=None, description="Who answered (v7).")
    fallback: bool | None = Field(default=None, description="Whether a fallback answered (v7).")
    input_record: str | None = Field(default=None, description="The input line (v8).")

    @field_validator("messages")
    @classmethod
    def _messages_without_bytes(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        return _refuse_inline_media(value, "messages")

    @field_validator("tool_results")
    @classmethod
    def _tool_results_are_tool_messages(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        return _tool_messages(value)


EventPayload = Annotated[
    UnknownPayload
    | InputPayload
    | ChatRequestPayload
    | ChatResponsePayload
    | ToolRequestPayload
    | ToolResponsePayload
    | OutputPayload
    | ErrorPayload
    | BudgetExceededPayload
    | BudgetDeferredPayload
    | MemoryTrimmedPayload
    | ServerToolPayload
    | ContextCachePayload
    | ApprovalRequestedPayload
    | ApprovalDecidedPayload
    | ApprovalExpiredPayload
    | FollowupScheduledPayload
    | FollowupFiredPayload
    | FollowupCancelledPayload,
    Field(discriminator="kind"),
]
"""What an event carries: the payload model of its type, told apart by `kind`."""

PAYLOAD_MODELS: dict[str, type[BaseModel]] = {
    model.model_fields["kind"].default: model for model in get_args(get_args(EventPayload)[0])
}
"""The payload model of each event type, by its name."""
