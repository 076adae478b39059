"""Test doubles for the operator tests: a fixed-latency echo model (not a provider) and tools.

The e2e jobs import this module inside Flink's embedded Python, so the tests put this folder
on PYTHONPATH before the first PyFlink environment starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.connectors.models.base import ChatModel
from streamagents.operators.config import AgentConfig
from streamagents.operators.runtime import AgentRuntime
from streamagents.operators.tools import ToolRegistry
from streamagents.serde.chat import ChatResponse, TokenUsage, ToolSpec
from streamagents.serde.messages import ChatMessage


class EchoTestModel(ChatModel):
    """Test double: after a fixed delay, answers with the last user message's text."""

    provider = "echo-test-double"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        """Sleep `delay_s`, then echo."""
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        last = next((m for m in reversed(messages) if m.role == "user"), None)
        text = last.content if last is not None else ""
        return ChatResponse(
            message=ChatMessage(role="assistant", content=f"echo: {text}"),
            usage=TokenUsage(input_tokens=3, output_tokens=2),
        )


def echo_runtime(config: AgentConfig, delay_s: float = 0.0) -> AgentRuntime:
    """A runtime whose model is the echo test double, with no tools."""
    return AgentRuntime(
        config, EchoTestModel(delay_s), ToolRegistry(), MediaStore(config.media_store)
    )
