"""The runtime through the real Interactions adapter (google-genai) against the loopback stub:
the run keeps its stored interaction in state and continues it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from doubles import drive
from provider_wire import wire_bytes
from runtime_tools import PNG

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import GeminiInteractionsModel
from streamagents.operators.agent import AgentRuntime, RunState
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.run_state import Finish

INPUT = '{"id": "in-1", "key": "k", "text": "What does north see?"}'


def config(stub: LoopbackStubServer, tmp_path: Path) -> AgentConfig:
    return AgentConfig(
        model=ModelSpec(
            provider="gemini-interactions",
            model="gemini-3-pro",
            options={"api_key": "test-key", "base_url": stub.url, "max_retries": 0},
        ),
        system_prompt="Describe what the cameras see.",
        tools=["runtime_tools:camera"],
        media_store=str(tmp_path / "media"),
    )


def camera_call(id: str = "int-1") -> dict[str, Any]:
    return {
        "id": id,
        "status": "requires_action",
        "steps": [
            {"type": "thought", "signature": "c2lnLTE="},
            {
                "type": "function_call",
                "id": "fc-1",
                "name": "camera",
                "arguments": {"name": "north"},
            },
        ],
    }


def answer(text: str, id: str = "int-2") -> dict[str, Any]:
    return {
        "id": id,
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": text}]}],
        "usage": {"total_input_tokens": 20, "total_output_tokens": 4},
    }


def test_a_tool_image_reaches_the_model_in_a_continued_function_result(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    stub.script(camera_call(), answer("A cat on a wall."))
    runtime = AgentRuntime.from_config(config(stub, tmp_path))
    assert isinstance(runtime.model, GeminiInteractionsModel)
    done = drive(runtime, INPUT)

    assert done.output["status"] == "ok" and done.output["text"] == "A cat on a wall."
    first, second = (r.json for r in stub.requests)
    assert "previous_interaction_id" not in first
    assert [s["type"] for s in first["input"]] == ["user_input"]
    assert second["previous_interaction_id"] == "int-1"
    assert second["system_instruction"] == "Describe what the cameras see."
    (result,) = second["input"]
    assert (result["type"], result["call_id"], result["name"]) == (
        "function_result",
        "fc-1",
        "camera",
    )
    text, image = result["result"]
    assert text == {"type": "text", "text": "picture from north"}
    assert image["type"] == "image" and wire_bytes(image["data"]) == PNG

    assert [s.interaction_id for s in done.states] == [None, "int-1", "int-1"]
    responses = [e["payload"] for e in done.events if e["event_type"] == "chat_response"]
    assert [(p["interaction_id"], p["continued_from"]) for p in responses] == [
        ("int-1", None),
        ("int-2", "int-1"),
    ]


def test_a_restored_run_continues_from_the_interaction_in_its_state(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    stub.script(camera_call())
    runtime = AgentRuntime.from_config(config(stub, tmp_path))
    now = int(time.time() * 1000)
    step = runtime.start(runtime.parse(INPUT), [], now)
    for _ in range(2):  # the model call, then the tool call
        assert step.state is not None
        step = runtime.advance(step.state, asyncio.run(runtime.perform(step.state, [])), now)
    assert step.state is not None
    kept = step.state.model_dump_json()  # what keyed state holds across the failure

    restored = AgentRuntime.from_config(config(stub, tmp_path))
    state = RunState.model_validate_json(kept)
    assert state.interaction_id == "int-1"
    stub.script(answer("A cat on a wall."))
    final = restored.advance(state, asyncio.run(restored.perform(state, [])), now, [])
    assert isinstance(final, Finish)
    assert stub.requests[-1].json["previous_interaction_id"] == "int-1"
    assert len(stub.requests[-1].json["input"]) == 1


def test_an_expired_interaction_falls_back_once_and_the_event_log_says_so(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    gone = {"error": {"code": 404, "message": "Interaction not found", "status": "NOT_FOUND"}}
    stub.script(camera_call(), StubReply(gone, status=404), answer("A cat.", id="int-3"))
    done = drive(AgentRuntime.from_config(config(stub, tmp_path)), INPUT)

    assert done.output["status"] == "ok"
    continued, full = (r.json for r in stub.requests[1:])
    assert continued["previous_interaction_id"] == "int-1"
    assert "previous_interaction_id" not in full
    assert [s["type"] for s in full["input"]] == [
        "user_input",
        "thought",
        "function_call",
        "function_result",
    ]
    assert full["input"][1]["signature"] == "c2lnLTE="
    response = [e["payload"] for e in done.events if e["event_type"] == "chat_response"][-1]
    assert (response["interaction_id"], response["continued_from"]) == ("int-3", None)
    assert "int-1 is gone" in response["attributes"]["continuation_fallback"]


def test_other_wires_never_see_a_previous_interaction_id(tmp_path: Path) -> None:
    from doubles import scripted_runtime

    from streamagents.testing import answer as scripted_answer
    from streamagents.testing import calls

    runtime = scripted_runtime(tmp_path, [calls(("echo", {})), scripted_answer("done")])
    drive(runtime, INPUT)
    assert all("previous_interaction_id" not in c.options for c in runtime.model.calls)
