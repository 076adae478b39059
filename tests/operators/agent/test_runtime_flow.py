"""The run state machine: requests, the tool loop, output records, events, memory, replays."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from doubles import drive, scripted_runtime

from streamagents.operators.agent import AgentRuntime, Outcome, RunState
from streamagents.operators.agent.config import MemoryConfig, ModelSpec, TelemetryConfig
from streamagents.operators.agent.run_state import Stale
from streamagents.serde.messages import ChatMessage
from streamagents.testing import Reply, ScriptedTestModel, answer, calls


def weather(city: str) -> dict:
    """Current weather of a city.

    Args:
        city: City name.
    """
    return {"city": city, "celsius": 21}


def clock() -> str:
    """The time."""
    return "12:00"


def make_runtime(tmp_path: Path, *replies: Reply, **config: Any) -> AgentRuntime:
    model = ModelSpec(provider="test", model="scripted", generation={"temperature": 0.1})
    prompt = "You are terse."
    return scripted_runtime(
        tmp_path, replies, [weather, clock], model=model, system_prompt=prompt, **config
    )


def scripted(runtime: AgentRuntime) -> ScriptedTestModel:
    assert isinstance(runtime.model, ScriptedTestModel)
    return runtime.model


def test_text_answer_gives_an_ok_output_record_with_the_contract_fields(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, answer("Hi!", input_tokens=7, output_tokens=3))
    done = drive(runtime, '{"id": "in-1", "key": "k", "text": "hello", "lang": "en"}')
    assert done.output == {
        "id": "in-1",
        "key": "k",
        "run_id": done.output["run_id"],
        "status": "ok",
        "text": "Hi!",
        "parts": [],
        "error": None,
        "usage": {"input_tokens": 7, "output_tokens": 3, "cached_tokens": 0},
        "model_calls": 1,
        "tool_calls": 0,
        "latency_ms": 10,
        "attributes": {"lang": "en"},
        "answered_by": {"provider": "test", "model": "scripted", "fallback": False},
        "cost_usd": None,  # the test double's model has no price
        "call_costs_usd": [None],
    }
    assert done.dead_letter is None


def test_request_is_system_prompt_then_history_then_the_run(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, answer("again"))
    history = [ChatMessage.user("earlier"), ChatMessage(role="assistant", content="ok")]
    drive(runtime, '{"key": "k", "text": "now"}', history=history)
    call = scripted(runtime).calls[0]
    assert [(m.role, m.content) for m in call.messages] == [
        ("system", "You are terse."),
        ("user", "earlier"),
        ("assistant", "ok"),
        ("user", "now"),
    ]
    assert [t.name for t in call.tools] == ["weather", "clock"]
    assert call.tools[0].parameters["properties"]["city"]["description"] == "City name."
    assert call.options == {"temperature": 0.1}


def test_tool_loop_runs_parallel_calls_and_sends_results_back_in_call_order(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(
        tmp_path,
        calls(("weather", {"city": "Oslo"}), ("clock", {})),
        calls(("weather", {"city": "Rome"})),
        answer("Oslo 21, Rome 21 at 12:00"),
    )
    done = drive(runtime, '{"key": "k", "text": "weather?"}')
    model = scripted(runtime)
    assert len(model.calls) == 3
    second = model.calls[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert [(m.tool_call_id, m.name) for m in second[3:]] == [
        ("call-0", "weather"),
        ("call-1", "clock"),
    ]
    assert json.loads(second[3].content) == {"city": "Oslo", "celsius": 21}
    assert second[4].content == "12:00"
    assert done.output["status"] == "ok"
    assert (done.output["model_calls"], done.output["tool_calls"]) == (3, 3)
    assert [s.pending.kind for s in done.states] == ["model", "tools", "model", "tools", "model"]


def test_events_let_a_reader_rebuild_the_run(tmp_path: Path) -> None:
    runtime = make_runtime(
        tmp_path, calls(("weather", {"city": "Oslo"}), ("clock", {})), answer("done")
    )
    done = drive(runtime, '{"id": "in-9", "key": "k", "text": "weather?"}')
    events = done.events
    assert [e["event_type"] for e in events] == [
        "input",
        "chat_request",
        "chat_response",
        "tool_request",
        "tool_request",
        "tool_response",
        "tool_response",
        "chat_request",
        "chat_response",
        "output",
    ]
    run_id = done.output["run_id"]
    assert {e["run_id"] for e in events} == {run_id}
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    by_id = {e["event_id"]: e for e in events}
    assert len(by_id) == len(events)
    assert events[0]["upstream_event_id"] is None
    for event in events[1:]:
        assert by_id[event["upstream_event_id"]]["sequence"] < event["sequence"]
    # each tool response points at its own request, which points at the chat response
    for response in (e for e in events if e["event_type"] == "tool_response"):
        request = by_id[response["upstream_event_id"]]
        call_id = response["payload"]["tool_results"][0]["tool_call_id"]
        assert request["payload"]["tool_calls"][0]["id"] == call_id
        assert by_id[request["upstream_event_id"]]["event_type"] == "chat_response"
    assert events[0]["payload"]["messages"][0]["content"] == "weather?"
    facts = events[0]["payload"]["attributes"]
    assert facts == {"input_id": "in-9", "config_fingerprint": facts["config_fingerprint"]}
    assert facts["config_fingerprint"].startswith("cfg-")
    assert json.loads(events[0]["payload"]["input_record"])["text"] == "weather?"
    assert events[-1]["payload"]["messages"][0]["content"] == "done"
    assert events[-1]["payload"]["usage"] == done.output["usage"]
    assert events[-1]["payload"]["attributes"] == {"input_id": "in-9", "status": "ok"}


def test_run_and_event_ids_are_deterministic_across_replays(tmp_path: Path) -> None:
    script = (calls(("clock", {})), answer("noon"))
    first = drive(make_runtime(tmp_path, *script), '{"id": "same", "key": "k", "text": "t?"}')
    again = drive(make_runtime(tmp_path, *script), '{"id": "same", "key": "k", "text": "t?"}')
    other = drive(make_runtime(tmp_path, *script), '{"id": "other", "key": "k", "text": "t?"}')
    assert [e["event_id"] for e in first.events] == [e["event_id"] for e in again.events]
    assert first.output["run_id"] == again.output["run_id"] != other.output["run_id"]
    assert without_latency(first.events) == without_latency(again.events)


def without_latency(events: list[dict]) -> list[dict]:
    """Events minus the measured call latency, the one field a replay cannot repeat."""
    return [
        {**e, "payload": {k: v for k, v in e["payload"].items() if k != "latency_ms"}}
        for e in events
    ]


def test_input_without_id_gets_the_sha256_of_the_raw_line(tmp_path: Path) -> None:
    import hashlib

    raw = '{"key": 5, "text": "hi"}'
    done = drive(make_runtime(tmp_path, answer("x")), raw)
    assert done.output["id"] == hashlib.sha256(raw.encode()).hexdigest()
    assert done.output["key"] == "5"


def test_state_round_trips_through_json_and_a_reissued_step_gives_the_same_records(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(tmp_path, calls(("clock", {})), calls(("clock", {})))
    step = runtime.start(runtime.parse('{"key": "k", "text": "t?"}'), [], 1_000)
    runtime.clock_ms = lambda: 1_000.0
    assert step.state is not None
    outcome = asyncio.run(runtime.perform(step.state, []))
    restored = RunState.model_validate_json(step.state.model_dump_json())
    assert restored == step.state
    # the same model step performed again after a "restore" gives identical records
    again = asyncio.run(runtime.perform(restored, []))
    first = runtime.advance(step.state, outcome, 2_000, [])
    second = runtime.advance(restored, Outcome.model_validate_json(again.model_dump_json()), 2_000)
    assert first.state == second.state
    assert without_latency([json.loads(e.json()) for e in first.events]) == without_latency(
        [json.loads(e.json()) for e in second.events]
    )
    assert Outcome.model_validate_json(outcome.model_dump_json()) == outcome


def test_an_outcome_for_another_action_is_ignored(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, calls(("clock", {})), answer("x"))
    runtime.clock_ms = lambda: 1_000.0
    step = runtime.start(runtime.parse('{"key": "k", "text": "t?"}'), [], 1_000)
    assert step.state is not None
    model_outcome = asyncio.run(runtime.perform(step.state, []))
    tools_step = runtime.advance(step.state, model_outcome, 1_010)
    assert tools_step.state is not None
    stale = runtime.advance(tools_step.state, model_outcome, 1_020)
    assert isinstance(stale, Stale) and stale.state == tools_step.state and stale.events == []


def test_history_gains_the_run_and_is_trimmed_with_an_event(tmp_path: Path) -> None:
    runtime = make_runtime(
        tmp_path, calls(("clock", {})), answer("noon"), memory=MemoryConfig(max_messages=5)
    )
    history = [ChatMessage.user("old"), ChatMessage(role="assistant", content="old answer")]
    done = drive(runtime, '{"key": "k", "text": "time?"}', history=history)
    assert done.history is not None
    assert [(m.role, m.content) for m in done.history] == [
        ("user", "time?"),
        ("assistant", ""),
        ("tool", "12:00"),
        ("assistant", "noon"),
    ]
    trimmed = [e for e in done.events if e["event_type"] == "memory_trimmed"]
    assert len(trimmed) == 1
    facts = trimmed[0]["payload"]["attributes"]
    assert (facts["dropped_messages"], facts["kept_messages"]) == ("2", "4")


def test_history_without_trimming_has_no_trim_event(tmp_path: Path) -> None:
    done = drive(make_runtime(tmp_path, answer("x")), '{"key": "k", "text": "t"}')
    assert done.history == [ChatMessage.user("t"), ChatMessage(role="assistant", content="x")]
    assert not [e for e in done.events if e["event_type"] == "memory_trimmed"]


def test_event_log_off_emits_no_events_but_the_output(tmp_path: Path) -> None:
    done = drive(
        make_runtime(tmp_path, answer("x"), event_log_level="off"), '{"key":"k","text":"t"}'
    )
    assert done.events == [] and done.output["status"] == "ok"


def test_with_the_log_off_telemetry_still_gets_the_events_its_spans_are_built_from(
    tmp_path: Path,
) -> None:
    telemetry = TelemetryConfig(otlp_endpoint="http://127.0.0.1:4318")
    runtime = make_runtime(tmp_path, answer("x"), event_log_level="off", telemetry=telemetry)
    done = drive(runtime, '{"key":"k","text":"t"}')
    kinds = [event["event_type"] for event in done.events]
    assert kinds == ["input", "chat_request", "chat_response", "output"]


@pytest.mark.parametrize("key_field", ["customer.id"])
def test_dotted_key_field(tmp_path: Path, key_field: str) -> None:
    runtime = make_runtime(tmp_path, answer("x"), key_field=key_field)
    done = drive(runtime, '{"customer": {"id": 42}, "text": "t"}')
    assert done.output["key"] == "42"
    assert done.output["attributes"] == {"customer": {"id": 42}}


def test_aclose_closes_the_model(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    asyncio.run(runtime.aclose())
    assert scripted(runtime).closed
