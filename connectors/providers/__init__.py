"""Chat-model providers behind one interface, and `create_model` to build one by name."""

from __future__ import annotations

from typing import Any

from streamagents.connectors.providers._adapter_base import ChatModel
from streamagents.connectors.providers._errors import (
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
from streamagents.connectors.providers._retry import RetryBudget, RetryPolicy
from streamagents.connectors.providers.gemini import GeminiChatModel, GeminiInteractionsModel
from streamagents.connectors.providers.openai import OpenAIChatModel, OpenAIResponsesModel

__all__ = [
    "PROVIDERS",
    "BadRequest",
    "ChatModel",
    "ConnectionFailed",
    "EmptyResponseError",
    "GeminiChatModel",
    "GeminiInteractionsModel",
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
    "gemini-interactions": GeminiInteractionsModel,
    "openai": OpenAIChatModel,
    "openai-responses": OpenAIResponsesModel,
}
"""Provider names accepted by `create_model`, and the adapter each one builds."""


def create_model(provider: str, model: str, **options: Any) -> ChatModel:
    """Build the adapter for `provider` ("gemini", "gemini-interactions", "openai",
    "openai-responses") and `model`.

    `options` are the adapter's constructor keyword arguments: the shared `ModelOptions`
    (api_key, base_url, timeout, max_retries, retry, retry_budget, media_store, generation)
    and its family's own; an unknown one is a `TypeError` that names it.
    """
    try:
        adapter = PROVIDERS[provider]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown model provider {provider!r}; known: {known}") from None
    return adapter(model, **options)  # type: ignore[call-arg]
