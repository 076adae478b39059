"""A run's spend: each model call priced by the model that answered, at the spec's prices or
the published table's, in the output record and the events; unknown prices stay null."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from doubles import drive, scripted_runtime

from streamagents.connectors.providers.prices import ModelPrices
from streamagents.operators.agent.config import ModelSpec
from streamagents.operators.telemetry.spans import spans_from_events
from streamagents.serde.chat import ChatResponse
from streamagents.serde.events import AgentEvent
from streamagents.testing import answer, calls

RAW = '{"id": "in-1", "key": "k", "text": "go"}'


def ping() -> str:
    """Ping."""
    return "pong"


def reported(response: ChatResponse, model: str) -> ChatResponse:
    return response.model_copy(update={"model_version": model})


def test_each_call_is_priced_by_the_model_that_answered_it(tmp_path: Path) -> None:
    spec = ModelSpec(provider="openai", model="gpt-4.1")
    replies = [
        reported(calls(("ping", {}), tokens=1_000_000), "gpt-4.1-mini-2025-04-14"),
        reported(answer("done", input_tokens=1_000_000, output_tokens=0), "gpt-4.1-2025-04-14"),
    ]
    done = drive(scripted_runtime(tmp_path, replies, [ping], model=spec), RAW)
    # gpt-4.1-mini: $0.40 in + $1.60 out per million; gpt-4.1: $2.00 in
    assert done.output["call_costs_usd"] == [pytest.approx(2.0), pytest.approx(2.0)]
    assert done.output["cost_usd"] == pytest.approx(4.0)
    responses = [e for e in done.events if e["event_type"] == "chat_response"]
    assert [e["payload"]["cost_usd"] for e in responses] == [pytest.approx(2.0)] * 2
    (output_event,) = [e for e in done.events if e["event_type"] == "output"]
    assert output_event["payload"]["cost_usd"] == pytest.approx(4.0)
    spans = spans_from_events(AgentEvent.model_validate(e) for e in done.events)
    chats = [s.attributes["streamagents.cost_usd"] for s in spans if s.name.startswith("chat")]
    assert chats == [pytest.approx(2.0)] * 2
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.attributes["streamagents.cost_usd"] == pytest.approx(4.0)


def test_the_specs_prices_override_the_table(tmp_path: Path) -> None:
    prices = ModelPrices(input_per_million=10.0, output_per_million=100.0)
    spec = ModelSpec(provider="gemini", model="gemini-2.5-flash", prices=prices)
    reply = answer("hi", input_tokens=100_000, output_tokens=10_000)
    done = drive(scripted_runtime(tmp_path, [reply], model=spec), RAW)
    assert done.output["cost_usd"] == pytest.approx(1.0 + 1.0)


def test_a_model_without_a_price_has_a_null_cost_said_once_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = ModelSpec(provider="openai", model="my-fine-tune-7")
    caplog.set_level(logging.WARNING, logger="streamagents.operators.agent.call_cost")
    for _ in range(2):
        done = drive(scripted_runtime(tmp_path, [answer("a"), answer("b")], model=spec), RAW)
        assert (done.output["cost_usd"], done.output["call_costs_usd"]) == (None, [None])
        responses = [e for e in done.events if e["event_type"] == "chat_response"]
        assert (
            "cost_usd" not in responses[0]["payload"] or responses[0]["payload"]["cost_usd"] is None
        )
    said = [r for r in caplog.records if "my-fine-tune-7" in r.getMessage()]
    assert len(said) == 1 and "unknown" in said[0].getMessage()
