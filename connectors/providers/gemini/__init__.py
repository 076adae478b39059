"""Gemini through `google-genai`: the pure wires (`wire` for generateContent,
`interactions_wire` for the Interactions API) and the models sending them.

The models are imported on first use (PEP 562 `__getattr__`), so a process that sends
generateContent requests does not import the Interactions client, nor the reverse.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamagents.connectors.providers.gemini._interactions_model import (
        GeminiInteractionsModel,
        GeminiInteractionsOptions,
    )
    from streamagents.connectors.providers.gemini._model import (
        ContextCacheSettings,
        GeminiChatModel,
        GeminiOptions,
    )

__all__ = [
    "ContextCacheSettings",
    "GeminiChatModel",
    "GeminiInteractionsModel",
    "GeminiInteractionsOptions",
    "GeminiOptions",
]

_HOMES = {
    "ContextCacheSettings": "_model",
    "GeminiChatModel": "_model",
    "GeminiOptions": "_model",
    "GeminiInteractionsModel": "_interactions_model",
    "GeminiInteractionsOptions": "_interactions_model",
}


def __getattr__(name: str) -> Any:
    """Import a model or its options on first use (then kept as a global)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
