"""Test doubles for agent-runtime tests: a scripted ChatModel (not a provider) and helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamagents.connectors.models.base import ChatModel
from streamagents.serde.chat import ChatResponse, TokenUsage, ToolSpec
from streamagents.serde.messages import ChatMessage, ToolCall

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


def scripted_runtime(
    tmp_path: Any, replies: Sequence[Reply], tools: Sequence[Any] = (), **config: Any
) -> Any:
    """An AgentRuntime over a ScriptedTestModel, the given tools and a store under tmp_path."""
    from streamagents.connectors.media import MediaStore
    from streamagents.operators.config import AgentConfig, ModelSpec
    from streamagents.operators.runtime import AgentRuntime
    from streamagents.operators.tools import ToolRegistry

    config.setdefault("model", ModelSpec(provider="test", model="scripted"))
    cfg = AgentConfig(media_store=str(tmp_path / "media"), **config)
    model = ScriptedTestModel(list(replies))
    return AgentRuntime(cfg, model, ToolRegistry(tools), MediaStore(cfg.media_store))


@dataclass
class Finished:
    """Everything a driven run produced."""

    steps: list[Any]
    events: list[dict[str, Any]]
    output: dict[str, Any]
    dead_letter: dict[str, Any] | None
    history: list[ChatMessage] | None
    states: list[Any]


def drive(
    runtime: Any,
    raw: str,
    history: Sequence[ChatMessage] = (),
    now_ms: int = 1_000_000,
    step_ms: int = 10,
) -> Finished:
    """Run one input to completion the way the engine does: start, then perform/advance."""
    import json

    record = runtime.parse(raw)
    runtime.clock_ms = lambda: float(now_ms)
    step = runtime.start(record, list(history), now_ms)
    steps, states = [step], []
    while step.state is not None:
        states.append(step.state)
        outcome = asyncio.run(runtime.perform(step.state, list(history)))
        now_ms += step_ms
        step = runtime.advance(step.state, outcome, now_ms, list(history))
        steps.append(step)
    from streamagents.serde.events import AgentEvent

    for event in (e for s in steps for e in s.events):
        AgentEvent.model_validate_json(event)  # every record is a valid event-log event
    events = [json.loads(e) for s in steps for e in s.events]
    return Finished(
        steps=steps,
        events=events,
        output=json.loads(step.output),
        dead_letter=json.loads(step.dead_letter) if step.dead_letter else None,
        history=step.history,
        states=states,
    )
