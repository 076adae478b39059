"""Chat-model providers behind one interface, and `create_model` to build one by name.

The adapters and `PROVIDERS` are imported on first use (PEP 562 `__getattr__`): each
family pulls in its SDK, and a process that needs one adapter (the SDK worker, say) then
does not import the other SDK.

An adapter is written with the public modules here: `base` (`ChatModel`, `ModelOptions`,
the SDK shell `SDKChatModel`), `errors`, `retry`, `neutral_request` and `media_encoding`.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from streamagents.connectors.providers.base import ChatModel
from streamagents.connectors.providers.errors import (
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
from streamagents.connectors.providers.retry import RetryBudget, RetryPolicy

if TYPE_CHECKING:
    from streamagents.connectors.providers.gemini import (
        GeminiChatModel,
        GeminiInteractionsModel,
    )
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

_ADAPTERS = {
    "GeminiChatModel": "streamagents.connectors.providers.gemini._model",
    "GeminiInteractionsModel": "streamagents.connectors.providers.gemini._interactions_model",
    "OpenAIChatModel": "streamagents.connectors.providers.openai._models",
    "OpenAIResponsesModel": "streamagents.connectors.providers.openai._models",
}
_PROVIDER_ADAPTERS = {
    "gemini": "GeminiChatModel",
    "gemini-interactions": "GeminiInteractionsModel",
    "openai": "OpenAIChatModel",
    "openai-responses": "OpenAIResponsesModel",
}


@functools.cache
def _providers() -> dict[str, type[ChatModel]]:
    """`PROVIDERS`: provider name -> adapter class (the names `create_model` accepts)."""
    return {provider: __getattr__(adapter) for provider, adapter in _PROVIDER_ADAPTERS.items()}


def __getattr__(name: str) -> Any:
    """Import an adapter, or build `PROVIDERS`, on first use."""
    if name == "PROVIDERS":
        return _providers()
    if name not in _ADAPTERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_ADAPTERS[name]), name)


def create_model(provider: str, model: str, **options: Any) -> ChatModel:
    """Build the adapter for `provider` ("gemini", "gemini-interactions", "openai",
    "openai-responses") and `model`.

    `options` are the adapter's constructor keyword arguments: the shared `ModelOptions`
    (api_key, base_url, timeout, max_retries, retry, retry_budget, media_store, generation)
    and its family's own; an unknown one is a `TypeError` that names it.
    """
    providers = _providers()
    try:
        adapter = providers[provider]
    except KeyError:
        known = ", ".join(sorted(providers))
        raise ValueError(f"unknown model provider {provider!r}; known: {known}") from None
    return adapter(model, **options)  # type: ignore[call-arg]
