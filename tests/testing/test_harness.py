"""`streamagents.testing.AgentHarness`: a user's tools and prompts through the real engine."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from streamagents.operators.agent import AgentConfig, ModelSpec
from streamagents.operators.agent.config import ToolRef
from streamagents.operators.agent.records import InputError
from streamagents.testing import (
    AgentHarness,
    EchoTestModel,
    ScriptedTestModel,
    answer,
    calls,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


def _config(tmp_path: Path, **settings: object) -> AgentConfig:
    return AgentConfig(
        model=ModelSpec(provider="test", model="t"),
        media_store=str(tmp_path / "media"),
        **settings,
    )


def test_a_tool_the_model_calls_runs_and_its_result_reaches_the_model(tmp_path: Path) -> None:
    model = ScriptedTestModel([calls(("weather", {"city": "Paris"})), answer("Sunny, go out.")])
    config = _config(tmp_path, system_prompt="Be brief.", tools=["e2e_tools:weather"])
    with AgentHarness(config, model) as agent:
        got = agent.ask("Weather in Paris?", key="ada")
    assert got.text == "Sunny, go out."
    assert got.output is not None and got.output["key"] == "ada"
    assert [(c["name"], c["arguments"]) for c in got.tool_calls()] == [
        ("weather", {"city": "Paris"})
    ]
    assert [r["content"] for r in got.tool_results()] == ["sunny in Paris"]
    first, second = model.calls
    assert first.messages[0].content == "Be brief."
    assert [tool.name for tool in first.tools] == ["weather"]
    assert second.messages[-1].role == "tool" and second.messages[-1].content == "sunny in Paris"
    kinds = [event["event_type"] for event in got.events]
    assert kinds[0] == "input" and kinds[-1] == "output" and "tool_response" in kinds


def test_memory_carries_a_key_over_to_its_next_input(tmp_path: Path) -> None:
    with AgentHarness(_config(tmp_path), EchoTestModel()) as agent:
        assert agent.ask("first", key="k").text == "echo: first"
        agent.ask("second", key="k")
        model = agent.runtime.model
        assert isinstance(model, EchoTestModel) and model.requests == 2


def test_a_failing_model_call_gives_an_error_output_and_a_dead_letter(tmp_path: Path) -> None:
    model = ScriptedTestModel([RuntimeError("provider down")])
    with AgentHarness(_config(tmp_path), model) as agent:
        got = agent.ask("hello")
    assert got.output is not None and got.output["status"] == "error"
    assert got.dead_letter is not None and got.dead_letter["reason"] == "provider down"


def test_a_call_that_needs_approval_waits_then_runs_once_approved(tmp_path: Path) -> None:
    refund = ToolRef(ref="e2e_tools:refund_order", approval="required")
    model = ScriptedTestModel(
        [calls(("refund_order", {"order": "O-1", "amount": 5.0})), answer("Refunded.")]
    )
    with AgentHarness(_config(tmp_path, tools=[refund]), model) as agent:
        asked = agent.ask("Refund O-1", key="ada")
        assert asked.output is None
        (request,) = asked.approval_requests
        assert request["tool"] == "refund_order"
        decided = agent.decide(request, "approve")
    assert decided.text == "Refunded."
    assert [r["name"] for r in decided.tool_results()] == ["refund_order"]


def test_a_line_without_the_key_field_is_refused(tmp_path: Path) -> None:
    with (
        AgentHarness(_config(tmp_path), EchoTestModel()) as agent,
        pytest.raises(InputError, match="key"),
    ):
        agent.answer('{"id": "a", "text": "no key"}')


def test_a_spec_agent_runs_with_a_scripted_model_in_place_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = Path(shutil.copy(EXAMPLE, tmp_path / "job.yaml"))
    model = ScriptedTestModel(
        [calls(("lookup_order", {"order_id": "O-5521"})), answer("On its way.")]
    )
    with AgentHarness.from_spec(spec, model) as agent:
        assert agent.runtime.parse(agent.input_line("hi", key="C-1")).key == "C-1"  # customer.id
        answered = agent.ask("Where is O-5521?", customer={"id": "C-17"})
    assert answered.text == "On its way."
    assert answered.tool_results()[0]["name"] == "lookup_order"
    assert "support agent" in model.calls[0].messages[0].content  # the spec's system prompt


def test_the_demo_model_of_a_spec_is_served_while_the_harness_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = Path(shutil.copy(EXAMPLE, tmp_path / "job.yaml"))
    with AgentHarness.from_spec(spec) as agent:
        got = agent.ask("Where is my order O-5521?", customer={"id": "C-17"})
    assert got.text.startswith("[DEMO MODEL")
    assert [c["name"] for c in got.tool_calls()] == ["lookup_order"]
