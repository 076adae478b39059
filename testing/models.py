"""Test models: `ChatModel`s that answer without a provider, for tests of tools and prompts.

- `ScriptedTestModel` answers each call with the next reply of its script (`answer`,
  `calls`, an exception to raise, or a function of the messages) and records each request.
- `EchoTestModel` answers `echo: <the last user text>`; a user text `tool:<name> <arg>` first
  asks for the tool `name` with `{"order": arg}`, and after a tool result it answers
  `done: <the result's text>`. Deterministic, so a restored attempt asks it the same again.

Neither is a provider a job can pick; the example jobs' demo model is
`streamagents.jobs.examples.demo_responder`, served by the loopback stub.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamagents.connectors.providers import ChatModel
from streamagents.serde.chat import ChatResponse, TokenUsage, ToolSpec
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = ["EchoTestModel", "RecordedCall", "Reply", "ScriptedTestModel", "answer", "calls"]

Reply = ChatResponse | BaseException | Callable[[Sequence[ChatMessage]], ChatResponse]


@dataclass
class RecordedCall:
    """One request the scripted model received."""

    messages: list[ChatMessage]
    tools: list[ToolSpec]
    options: dict[str, Any]


@dataclass
class ScriptedTestModel(ChatModel):
    """Test double: answers each achat with the next scripted reply and records the request."""

    replies: list[Reply] = field(default_factory=list)
    delay_s: float = 0.0
    calls: list[RecordedCall] = field(default_factory=list)
    closed: bool = False
    provider: str = "scripted-test-double"

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Record the request and give the next scripted reply (raise it, if an exception)."""
        self.calls.append(RecordedCall(list(messages), list(tools), dict(options)))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not self.replies:
            raise AssertionError("ScriptedTestModel ran out of scripted replies")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(messages)
        return reply

    async def aclose(self) -> None:
        """Note that the model was closed."""
        self.closed = True


def answer(text: str, input_tokens: int = 10, output_tokens: int = 5) -> ChatResponse:
    """A final assistant answer."""
    return ChatResponse(
        message=ChatMessage(role="assistant", content=text),
        usage=TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens),
    )


def calls(*specs: tuple[str, dict[str, Any]], tokens: int = 10) -> ChatResponse:
    """An assistant turn asking for tool calls, ids call-0, call-1, ..."""
    tool_calls = [
        ToolCall(id=f"call-{i}", name=name, arguments=args) for i, (name, args) in enumerate(specs)
    ]
    return ChatResponse(
        message=ChatMessage(role="assistant", tool_calls=tool_calls),
        usage=TokenUsage(input_tokens=tokens, output_tokens=tokens),
    )


class EchoTestModel(ChatModel):
    """Test double: answers `echo: <the last user text>`; a user text `tool:<name> <arg>`
    first asks for the tool `name` with `{"order": arg}` (several calls of one turn:
    `tool:<name> <arg>;<name> <arg>`), and `followup:<seconds> <note>`
    for `schedule_followup`; after a tool result it answers `done: <the result's text>`.
    Deterministic, so a restored attempt asks it the same again."""

    provider = "echo-test-double"

    def __init__(self) -> None:
        """A model that has answered nothing yet (`requests` counts its calls)."""
        self.requests = 0

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        """Echo the last user text, ask for the tool it names, or report the tool's result."""
        self.requests += 1
        last = messages[-1]
        usage = TokenUsage(input_tokens=3, output_tokens=2)
        if last.role == "tool":
            reply = ChatMessage(role="assistant", content=f"done: {last.content}")
            return ChatResponse(message=reply, usage=usage)
        text = last.content
        calls = []
        if text.startswith("tool:"):
            for n, spec in enumerate(text[len("tool:") :].split(";")):
                name, _, arg = spec.partition(" ")
                calls.append(ToolCall(id=f"call-{n}", name=name, arguments={"order": arg}))
        elif text.startswith("followup:"):
            after, _, note = text[len("followup:") :].partition(" ")
            arguments = {"after_s": float(after), "note": note}
            calls.append(ToolCall(id="call-0", name="schedule_followup", arguments=arguments))
        if calls:
            return ChatResponse(
                message=ChatMessage(role="assistant", tool_calls=calls), usage=usage
            )
        return ChatResponse(
            message=ChatMessage(role="assistant", content=f"echo: {text}"), usage=usage
        )

    async def aclose(self) -> None:
        """Nothing to close."""
        return None
