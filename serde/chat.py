"""Provider-neutral types around a model call: tool specs, token usage and the response."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from streamagents.serde.messages import ChatMessage

__all__ = ["ChatResponse", "TokenUsage", "ToolSpec"]

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
    cached_input_tokens: int = Field(
        default=0,
        ge=0,
        description="Of the input tokens, those the provider served from its cache.",
    )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


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
