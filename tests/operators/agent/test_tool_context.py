"""A tool's `ToolContext`: given to the parameter annotated with it, never in the schema the
model sees; its idempotency key is the same when a restored run performs the call again,
and an MCP tool's request carries it in `_meta`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from doubles import drive
from engine_harness import OPEN, harness

from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import AgentRuntime, ToolContext, tool
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.mcp_tools import add_mcp_tools
from streamagents.operators.agent.tool_context import IDEMPOTENCY_META_KEY
from streamagents.operators.agent.tools import Tool, ToolRegistry
from streamagents.serde.messages import ToolCall
from streamagents.testing import EchoTestModel, ScriptedTestModel, answer, calls

SERVER = Path(__file__).parents[2] / "support" / "mcp_media_server.py"


class Payments:
    """A tool with a side effect outside the job: it keeps the context of every charge."""

    def __init__(self) -> None:
        self.seen: list[ToolContext] = []

    def tool(self) -> Tool:
        @tool(name="charge")
        def charge(order: str, context: ToolContext) -> str:
            """Charge an order.

            Args:
                order: The order to charge.
            """
            self.seen.append(context)
            return f"charged {order}"

        return charge


def test_the_context_parameter_is_not_in_the_schema() -> None:
    charge = Payments().tool()
    assert charge.context_parameter == "context"
    assert list(charge.parameters["properties"]) == ["order"]
    assert charge.parameters.get("required") == ["order"]


def test_two_context_parameters_are_refused() -> None:
    def twice(a: ToolContext, b: ToolContext) -> str:
        return ""

    with pytest.raises(TypeError, match="two parameters are annotated ToolContext"):
        Tool.from_function(twice)


def test_a_tool_asking_for_a_context_without_one_gets_an_error_result() -> None:
    registry = ToolRegistry([Payments().tool()])
    result = asyncio.run(registry.run(ToolCall(id="c", name="charge", arguments={"order": "a"})))
    assert result.is_error and "no ToolContext" in str(result.content)
    registry.close()


def test_the_context_names_the_run_and_its_key_is_stable_across_a_restore(
    tmp_path: Path,
) -> None:
    payments = Payments()
    h = harness(tmp_path, EchoTestModel(), [payments.tool()])
    h.send_input("k", "i1", "tool:charge a")
    h.complete("k")
    h.advance(1000)  # the tool call is in flight
    checkpoint = h.checkpoint()
    h.settle_all()
    h.restore(checkpoint)  # without the call journal, the tool runs again ...
    h.settle_all()
    h.send_input("k", "i2", "tool:charge a")
    h.settle_all()
    h.close()
    OPEN.remove(h)
    first, again, other_input = payments.seen
    assert again == first  # ... with the same idempotency key, for its system to dedupe
    assert other_input.idempotency_key != first.idempotency_key
    assert len(first.idempotency_key) == 32
    output = h.outputs()[0]
    assert (first.run_id, first.input_id, first.key) == (output["run_id"], "i1", "k")
    assert (first.tenant, first.attempt) == (None, 0)


def test_each_call_of_a_turn_has_its_own_key(tmp_path: Path) -> None:
    payments = Payments()
    h = harness(tmp_path, EchoTestModel(), [payments.tool()])
    h.send_input("k", "i1", "tool:charge a;charge a")
    h.settle_all()
    h.close()
    OPEN.remove(h)
    assert len({c.idempotency_key for c in payments.seen}) == 2


def test_an_mcp_call_carries_its_idempotency_key_in_meta(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path / "media"))
    registry = ToolRegistry()
    transport = {"type": "stdio", "command": sys.executable, "args": [str(SERVER), "stdio"]}
    server = McpServer.model_validate(
        {"name": "media", "transport": transport, "allow": ["request_meta"]}
    )
    add_mcp_tools(registry, [server], store)
    payments = Payments()
    registry.add(payments.tool())
    model = ScriptedTestModel(
        [calls(("mcp__media__request_meta", {}), ("charge", {"order": "a"})), answer("ok")]
    )
    config = AgentConfig(
        media_store=str(tmp_path / "media"), model=ModelSpec(provider="test", model="m")
    )
    try:
        finished = drive(
            AgentRuntime(config, model, registry, store), '{"id":"i1","key":"k","text":"go"}'
        )
    finally:
        registry.close()
    [response, _] = [e for e in finished.events if e["event_type"] == "tool_response"]
    meta = json.loads(response["payload"]["tool_results"][0]["content"])
    [charged] = payments.seen
    assert set(meta) == {IDEMPOTENCY_META_KEY}
    assert len(meta[IDEMPOTENCY_META_KEY]) == 32
    assert meta[IDEMPOTENCY_META_KEY] != charged.idempotency_key  # another call of the turn
