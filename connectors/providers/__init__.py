"""Chat-model providers behind one interface, and `create_model` to build one by name.

The adapters and `PROVIDERS` are imported on first use (PEP 562 `__getattr__`): each
family pulls in its SDK, and a process that needs one adapter (the SDK worker, a job, the
command line checking a spec) imports only that family's SDK (`adapter_class`).

An adapter is written with the public modules here: `base` (`ChatModel`, the SDK shell
`SDKChatModel`), `options` (its client and generation options), `errors`, `retry`,
`neutral_request` and `media_encoding`.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from streamagents.connectors.providers._prefix_cache import PrefixCache, PrefixCacheSettings
from streamagents.connectors.providers.admission import RateLimits
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
from streamagents.connectors.providers.retry import RetryBudget, RetryBudgetSettings, RetryPolicy
from streamagents.connectors.providers.sdk_process import SdkProcessModel, wants_worker
from streamagents.serde.message_json import MessageJson

if TYPE_CHECKING:
    from streamagents.connectors.providers.gemini import (
        GeminiChatModel,
        GeminiInteractionsModel,
    )
    from streamagents.connectors.providers.openai import OpenAIChatModel, OpenAIResponsesModel

__all__ = [
    "PROVIDERS",
    "PROVIDER_NAMES",
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
    "PrefixCache",
    "PrefixCacheSettings",
    "ProviderError",
    "RateLimited",
    "RateLimits",
    "RequestTimeout",
    "RetryBudget",
    "RetryBudgetSettings",
    "RetryPolicy",
    "ServerError",
    "UnsupportedContent",
    "adapter_class",
    "adapter_module",
    "create_model",
    "provider_family",
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
"""Each provider name and the adapter class it builds: the one place provider names are listed."""

PROVIDER_NAMES: tuple[str, ...] = tuple(_PROVIDER_ADAPTERS)
"""The provider names `create_model` accepts (known without importing any SDK)."""


def provider_family(provider: str) -> str | None:
    """The vendor family (`gemini`, `openai`: the subpackage of its adapter) of a provider
    name; None for a name that is not a provider."""
    module = adapter_module(provider)
    return None if module is None else module.split(".")[-2]


def adapter_module(provider: str) -> str | None:
    """The module that holds a provider name's adapter (importing it imports its SDK),
    without importing it; None for a name that is not a provider."""
    adapter = _PROVIDER_ADAPTERS.get(provider)
    return None if adapter is None else _ADAPTERS[adapter]


def adapter_class(provider: str) -> type[ChatModel]:
    """The adapter class of one provider name, importing only its family's SDK; raises
    `ValueError` for a name that is not a provider and `ImportError` when its SDK is
    missing."""
    adapter = _PROVIDER_ADAPTERS.get(provider)
    if adapter is None:
        known = ", ".join(sorted(PROVIDER_NAMES))
        raise ValueError(f"unknown model provider {provider!r}; known: {known}")
    found: type[ChatModel] = __getattr__(adapter)
    return found


@functools.cache
def _providers() -> dict[str, type[ChatModel]]:
    """`PROVIDERS`: provider name -> adapter class (imports every family's SDK)."""
    return {provider: adapter_class(provider) for provider in PROVIDER_NAMES}


def __getattr__(name: str) -> Any:
    """Import an adapter, or build `PROVIDERS`, on first use."""
    if name == "PROVIDERS":
        return _providers()
    if name not in _ADAPTERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_ADAPTERS[name]), name)


def create_model(
    provider: str,
    model: str,
    *,
    sdk_process: bool | None = False,
    message_json: MessageJson | None = None,
    prefix_cache: PrefixCache | None = None,
    **options: Any,
) -> ChatModel:
    """Build the adapter for `provider` (one of `PROVIDER_NAMES`) and `model`, ready to use.

    `options` are the adapter's constructor keyword arguments: what the operator gives
    every model (media_store, generation, limits, upload_media; `GeminiChatModel` also
    builtin_tools) and its client options (`options.client_options(provider)`: the shared
    api_key, base_url, timeout, max_retries, retry, retry_budget, transport, and its
    family's own); an unknown one is a `pydantic.ValidationError` that names it. `prefix_cache`
    asks for the request prefix to be cached on the server (Gemini's `context_cache`).
    `sdk_process` runs the adapter's SDK requests in a worker process (`SdkProcessModel`):
    True, False, or None where this process may use two cores or more (`wants_worker`);
    `message_json` is the caller's cache of messages' JSON, which the worker's requests share.
    """
    adapter = adapter_class(provider)
    if prefix_cache is not None:
        from streamagents.connectors.providers.gemini._context_cache import (
            ContextCacheSettings,
        )

        options["context_cache"] = ContextCacheSettings.for_prefix(prefix_cache)
    built = adapter(model, **options)  # type: ignore[call-arg]
    return SdkProcessModel(built, message_json) if wants_worker(sdk_process) else built
