"""Chat-model providers behind one interface, and `create_model` to build one by name."""

from __future__ import annotations

from typing import Any

from streamagents.connectors.models.base import ChatModel
from streamagents.connectors.models.errors import (
    BadRequest,
    ConnectionFailed,
    EmptyResponseError,
    InvalidContent,
    MalformedResponse,
    ProviderError,
    RateLimited,
    RequestTimeout,
    ServerError,
    UnsupportedContent,
)
from streamagents.connectors.models.gemini import GeminiChatModel
from streamagents.connectors.models.openai_chat import OpenAIChatModel
from streamagents.connectors.models.openai_responses import OpenAIResponsesModel
from streamagents.connectors.models.retry import RetryBudget, RetryPolicy

__all__ = [
    "PROVIDERS",
    "BadRequest",
    "ChatModel",
    "ConnectionFailed",
    "EmptyResponseError",
    "GeminiChatModel",
    "InvalidContent",
    "MalformedResponse",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderError",
    "RateLimited",
    "RequestTimeout",
    "RetryBudget",
    "RetryPolicy",
    "ServerError",
    "UnsupportedContent",
    "create_model",
]

PROVIDERS: dict[str, type[ChatModel]] = {
    "gemini": GeminiChatModel,
    "openai": OpenAIChatModel,
    "openai-responses": OpenAIResponsesModel,
}
"""Provider names accepted by `create_model`, and the adapter each one builds."""


def create_model(provider: str, model: str, **options: Any) -> ChatModel:
    """Build the adapter for `provider` ("gemini", "openai", "openai-responses") and `model`.

    `options` are the adapter's constructor keyword arguments (api_key, base_url, timeout,
    max_retries, media_store, ...).
    """
    try:
        adapter = PROVIDERS[provider]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown model provider {provider!r}; known: {known}") from None
    return adapter(model, **options)  # type: ignore[call-arg]
