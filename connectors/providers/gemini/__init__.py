"""Gemini through `google-genai`: the pure wire (`wire`) and `GeminiChatModel`, which sends it."""

from streamagents.connectors.providers.gemini._model import GeminiChatModel, GeminiOptions

__all__ = ["GeminiChatModel", "GeminiOptions"]
