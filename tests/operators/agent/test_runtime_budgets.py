"""Budgets: hitting one ends the run with an error output naming the budget and its limit."""

from __future__ import annotations

import asyncio
from pathlib import Path

from doubles import drive, emitted_json, scripted_runtime

from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import Budgets
from streamagents.operators.agent.run_state import Finish
from streamagents.testing import Reply, ScriptedTestModel, answer, calls

RAW = '{"id": "in-1", "key": "k", "text": "go"}'


def ping() -> str:
    """Ping."""
    return "pong"


def make_runtime(tmp_path: Path, budgets: Budgets, *replies: Reply) -> AgentRuntime:
    return scripted_runtime(tmp_path, replies, [ping], budgets=budgets)


def assert_budget_error(output: dict, budget: str, limit: float) -> None:
    assert output["status"] == "error"
    assert output["text"] == "" and output["parts"] == []
    error = output["error"]
    assert error["type"] == "BudgetExceeded"
    assert (error["budget"], error["limit"]) == (budget, limit)
    assert f"{budget}={limit:g}" in error["message"]


def test_max_model_calls_stops_a_model_that_keeps_calling_tools(tmp_path: Path) -> None:
    runtime = make_runtime(
        tmp_path, Budgets(max_model_calls=2), calls(("ping", {})), calls(("ping", {}))
    )
    done = drive(runtime, RAW)
    assert_budget_error(done.output, "max_model_calls", 2)
    assert done.output["model_calls"] == 2 and done.output["tool_calls"] == 1
    assert done.dead_letter is None and done.history is None
    assert [e["event_type"] for e in done.events][-2:] == ["budget_exceeded", "output"]
    payload = done.events[-2]["payload"]
    assert payload["error_class"] == "BudgetExceeded"
    assert payload["attributes"] == {"input_id": "in-1", "budget": "max_model_calls", "limit": "2"}


def test_max_tool_calls_refuses_a_turn_that_would_exceed_it(tmp_path: Path) -> None:
    runtime = make_runtime(
        tmp_path,
        Budgets(max_tool_calls=2),
        calls(("ping", {})),
        calls(("ping", {}), ("ping", {})),
    )
    done = drive(runtime, RAW)
    assert_budget_error(done.output, "max_tool_calls", 2)
    assert done.output["tool_calls"] == 1  # the refused turn's calls never ran
    assert "2 more, 3 in all" in done.output["error"]["message"]


def test_max_tokens_ends_the_run_before_another_call(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, Budgets(max_tokens=30), calls(("ping", {}), tokens=20))
    done = drive(runtime, RAW)
    assert_budget_error(done.output, "max_tokens", 30)
    assert done.output["usage"] == {"input_tokens": 20, "output_tokens": 20, "cached_tokens": 0}
    assert done.output["tool_calls"] == 0


def test_a_final_answer_is_delivered_even_when_it_crosses_max_tokens(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, Budgets(max_tokens=10), answer("ok", 50, 50))
    done = drive(runtime, RAW)
    assert done.output["status"] == "ok" and done.output["text"] == "ok"


def test_timeout_ends_the_run_naming_run_timeout(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, Budgets(run_timeout_s=5), calls(("ping", {})))
    step = runtime.start(runtime.parse(RAW), [], 1_000)
    assert step.state is not None
    ended = runtime.timeout(step.state, 6_000)
    assert isinstance(ended, Finish) and ended.dead_letter is None
    output = emitted_json(ended.output)
    assert_budget_error(output, "run_timeout_s", 5)
    assert output["latency_ms"] == 5_000


def test_an_outcome_arriving_after_the_deadline_ends_the_run(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, Budgets(run_timeout_s=5), answer("too late"))
    runtime.clock_ms = lambda: 1_000.0
    step = runtime.start(runtime.parse(RAW), [], 1_000)
    assert step.state is not None
    outcome = asyncio.run(runtime.perform(step.state, []))
    output = emitted_json(runtime.advance(step.state, outcome, 7_000, []).output)
    assert_budget_error(output, "run_timeout_s", 5)


def test_perform_cuts_a_slow_model_call_at_the_run_deadline(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, Budgets(run_timeout_s=0.05), answer("slow"))
    assert isinstance(runtime.model, ScriptedTestModel)
    runtime.model.delay_s = 10
    step = runtime.start(runtime.parse(RAW), [], 1_000)
    runtime.clock_ms = lambda: 1_000.0
    assert step.state is not None
    outcome = asyncio.run(runtime.perform(step.state, []))
    assert outcome.error is not None and outcome.error.type == "RunTimeout"
    output = emitted_json(runtime.advance(step.state, outcome, 1_010, []).output)
    assert_budget_error(output, "run_timeout_s", 0.05)
