"""Provider-neutral types around a model call: tool specs, token usage and the response."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from streamagents.serde.messages import ChatMessage

__all__ = [
    "AnsweredBy",
    "ChatResponse",
    "GroundingSource",
    "RetryAttempt",
    "ServerToolEvidence",
    "TokenUsage",
    "ToolSpec",
]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class ToolSpec(BaseModel):
    """A tool the model may call: its name, what it does, and its JSON-schema parameters."""

    model_config = _MODEL_CONFIG

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$", description="Tool name.")
    description: str = Field(default="", description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON schema of the arguments object.",
    )


class TokenUsage(BaseModel):
    """Tokens a model call consumed, as the provider reported them."""

    model_config = _MODEL_CONFIG

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    cached_tokens: int = Field(
        default=0, ge=0, description="Of the input tokens, those read from a context cache."
    )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class GroundingSource(BaseModel):
    """A web source a reply was grounded on."""

    model_config = _MODEL_CONFIG

    uri: str = Field(description="Where the source is.")
    title: str = Field(default="", description="Its title.")


class ServerToolEvidence(BaseModel):
    """What one built-in server-side tool (run on the provider's side) did for a reply.

    Evidence is for readers (the event log, a UI showing sources); it is never sent back
    to the model as conversation."""

    model_config = _MODEL_CONFIG

    tool: str = Field(description="google_search, url_context or code_execution.")
    queries: list[str] = Field(default_factory=list, description="Search queries issued.")
    sources: list[GroundingSource] = Field(
        default_factory=list, description="Web sources the reply was grounded on."
    )
    url: str | None = Field(default=None, description="A URL the URL-context tool retrieved.")
    status: str | None = Field(default=None, description="Its retrieval status.")
    language: str | None = Field(default=None, description="Language of the code run.")
    code: str | None = Field(default=None, description="Code the model ran.")
    outcome: str | None = Field(default=None, description="Outcome of running it.")
    output: str | None = Field(default=None, description="Its output.")


class RetryAttempt(BaseModel):
    """One failed attempt of a model call that was retried: facts only, no body or message."""

    model_config = _MODEL_CONFIG

    attempt: int = Field(ge=1, description="Its number (1 for the first request sent).")
    ended_ms: float = Field(description="When it failed, in ms since the epoch.")
    error_type: str = Field(description='Its error class, e.g. "RateLimited".')
    status: int | None = Field(default=None, description="The HTTP status, when one came.")
    backoff_ms: float = Field(ge=0, description="The wait before the next attempt.")


class AnsweredBy(BaseModel):
    """Which model of the agent's chain answered a call, and whether it was a fallback."""

    model_config = _MODEL_CONFIG

    provider: str = Field(description="Its provider name, e.g. gemini or openai-responses.")
    model: str = Field(description="Its model name as configured.")
    fallback: bool = Field(
        default=False, description="True when it is not the chain's first model (a fallback)."
    )

    @property
    def name(self) -> str:
        """`provider/model`, the name memory and metrics know the model by."""
        return f"{self.provider}/{self.model}"


class ChatResponse(BaseModel):
    """What one model call returned: the assistant message and facts about the call."""

    model_config = _MODEL_CONFIG

    message: ChatMessage = Field(description="The assistant message, with any tool calls.")
    usage: TokenUsage = Field(default_factory=TokenUsage, description="Token counts.")
    finish_reason: str | None = Field(default=None, description="Provider's finish reason.")
    model_version: str | None = Field(default=None, description="Model that answered.")
    latency_ms: float = Field(default=0.0, ge=0, description="Wall time of the call.")
    interaction_id: str | None = Field(
        default=None,
        description="The stored interaction a next request can continue (Interactions API).",
    )
    continued_from: str | None = Field(
        default=None,
        description="The stored interaction this request continued: only newer steps were sent.",
    )
    continuation_fallback: str | None = Field(
        default=None,
        description="Why a continuation was asked for but the whole conversation was sent.",
    )
    evidence: list[ServerToolEvidence] = Field(
        default_factory=list,
        description="What built-in server-side tools did for this reply (not conversation).",
    )
    cached_content: str | None = Field(
        default=None, description="The context cache the answered request referenced."
    )
    cache_events: list[dict[str, str]] = Field(
        default_factory=list,
        description="What happened to the model's context cache since the last reply "
        "(created, evicted, refused...), one dict of facts each, for the event log.",
    )
    retries: list[RetryAttempt] = Field(
        default_factory=list,
        description="The failed attempts retried before this reply (empty: the first worked).",
    )
    answered_by: AnsweredBy | None = Field(
        default=None,
        description="The model of a failover chain that answered (None: a single model).",
    )
    passed_over: list[str] = Field(
        default_factory=list,
        description="Models of the chain that failed or were skipped (breaker open) before "
        "the one that answered, as `provider/model`, in order.",
    )
