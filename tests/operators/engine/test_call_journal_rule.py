"""The call journal's promise as a state machine over the engine: inputs, call completions,
timers, checkpoints and crashes (a fail-over to the last checkpoint, at any step: between
a call's completion and the next checkpoint included). With the journal on, no completed
call is ever performed twice: the model is never asked the same request again, a tool never
runs twice for the same call; and every input is answered exactly once."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine_harness import OPEN, Checkpoint, EngineHarness
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from streamagents.connectors.call_journal import InMemoryCallJournal
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import ChatModel
from streamagents.operators.agent import AgentRuntime, ToolContext, tool
from streamagents.operators.agent.config import AgentConfig, JournalConfig, ModelSpec
from streamagents.operators.agent.tools import Tool, ToolRegistry
from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.messages import ChatMessage
from streamagents.testing import EchoTestModel

KEYS = ("a", "b")


class CountingModel(ChatModel):
    """`EchoTestModel`, counting how often each distinct request is asked."""

    provider = "counting-test-double"

    def __init__(self) -> None:
        self.echo = EchoTestModel()
        self.asked: Counter[str] = Counter()

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        self.asked["\n".join(m.model_dump_json() for m in messages)] += 1
        return await self.echo.achat(messages, tools, **options)

    async def aclose(self) -> None:
        """Nothing to close."""


class Ledger:
    """A tool with a side effect outside the job, counting executions per call."""

    def __init__(self) -> None:
        self.executed: Counter[str] = Counter()

    def tool(self) -> Tool:
        @tool(name="book")
        def book(order: str, context: ToolContext) -> str:
            """Book an order."""
            self.executed[context.idempotency_key] += 1
            return f"booked {order}"

        return book


class JournalMachine(RuleBasedStateMachine):
    """One subtask with the call journal on, crashing at any step."""

    h: EngineHarness

    def __init__(self) -> None:
        super().__init__()
        self.numbered = 0
        self.checkpoint_taken: Checkpoint | None = None
        self.model = CountingModel()
        self.ledger = Ledger()
        self.journal = InMemoryCallJournal()  # outside the job: it survives every crash

    @initialize(max_in_flight=st.integers(1, 3))
    def start(self, max_in_flight: int) -> None:
        media = str(Path(tempfile.mkdtemp(prefix="call-journal-rule-")) / "media")
        config = AgentConfig(
            media_store=media,
            model=ModelSpec(provider="test", model="engine-harness"),
            journal=JournalConfig(enabled=True),
            max_in_flight=max_in_flight,
        )
        tools = [self.ledger.tool()]

        def runtime() -> AgentRuntime:
            registry = ToolRegistry(tools)
            return AgentRuntime(
                config, self.model, registry, MediaStore(media), journal=self.journal
            )

        self.h = EngineHarness(runtime, config)
        OPEN.append(self.h)

    @rule(key=st.sampled_from(KEYS), uses_tool=st.booleans())
    def send(self, key: str, uses_tool: bool) -> None:
        self.numbered += 1
        text = f"tool:book {self.numbered}" if uses_tool else f"hello {self.numbered}"
        self.h.send_input(key, f"{key}-{self.numbered}", text)

    @precondition(lambda self: bool(self.h.runner.pending))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        self.h.runner.complete(data.draw(st.sampled_from(self.h.runner.pending)))

    @rule(ms=st.sampled_from([1, 1_000, 30_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)

    @rule()
    def checkpoint(self) -> None:
        self.checkpoint_taken = self.h.checkpoint()

    @precondition(lambda self: self.checkpoint_taken is not None)
    @rule()
    def crash(self) -> None:
        assert self.checkpoint_taken is not None
        self.h.restore(self.checkpoint_taken)

    @invariant()
    def no_completed_call_is_performed_twice(self) -> None:
        assert all(n == 1 for n in self.model.asked.values()), self.model.asked
        assert all(n == 1 for n in self.ledger.executed.values()), self.ledger.executed

    def teardown(self) -> None:
        if not hasattr(self, "h"):
            return
        self.h.settle_all()
        self.no_completed_call_is_performed_twice()
        answered = self.h.answered_ids()
        assert len(answered) == len(set(answered))
        sent = {line.split('"id": "', 1)[1].split('"', 1)[0] for _, line in self.h.sent}
        assert set(answered) == sent
        OPEN.remove(self.h)
        self.h.close()


JournalMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_no_completed_call_is_performed_twice = JournalMachine.TestCase
