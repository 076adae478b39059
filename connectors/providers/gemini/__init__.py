"""Gemini through `google-genai`: the pure wires (`wire` for generateContent,
`interactions_wire` for the Interactions API) and the models sending them."""

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
