"""The provider-neutral chat-model interface every provider adapter implements."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.messages import ChatMessage

__all__ = ["ChatModel"]


class ChatModel(ABC):
    """A chat model reached through a provider SDK: messages (and tools) in, a response out."""

    provider: str = "abstract"

    @abstractmethod
    async def achat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Send one request and return the assistant's reply."""

    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Blocking form of `achat`, for code that has no event loop running."""
        return asyncio.run(self.achat(messages, tools, **options))

    async def aclose(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Release the SDK client's connections."""
