"""Gemini through `google-genai`: the pure wires (`wire` for generateContent,
`interactions_wire` for the Interactions API) and the models sending them.

The models are imported on first use (PEP 562 `__getattr__`), so a process that sends
generateContent requests does not import the Interactions client, nor the reverse.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamagents.connectors.providers.gemini._context_cache import ContextCacheSettings
    from streamagents.connectors.providers.gemini._interactions_model import (
        GeminiInteractionsModel,
    )
    from streamagents.connectors.providers.gemini._model import GeminiChatModel

__all__ = [
    "ContextCacheSettings",
    "GeminiChatModel",
    "GeminiInteractionsModel",
]

_HOMES = {
    "ContextCacheSettings": "_context_cache",
    "GeminiChatModel": "_model",
    "GeminiInteractionsModel": "_interactions_model",
}


def __getattr__(name: str) -> Any:
    """Import a model or its cache settings on first use (then kept as a global)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
