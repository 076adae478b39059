"""OpenAI through `openai`: the Chat Completions and Responses wires and the models sending them."""

from streamagents.connectors.providers.openai._models import (
    OpenAIChatModel,
    OpenAIResponsesModel,
)

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel"]
