"""The runtime through the real Gemini adapter (google-genai) against the loopback stub."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from doubles import drive
from provider_wire import blob_bytes, snake
from runtime_tools import PNG

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import GeminiChatModel
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, ModelSpec

SIGNATURE = base64.b64encode(b"thought-signature").decode()
API_KEY = "test-key-do-not-leak"


def gemini_config(stub: LoopbackStubServer, tmp_path: Path) -> AgentConfig:
    return AgentConfig(
        model=ModelSpec(
            provider="gemini",
            model="gemini-3-pro",
            options={"api_key": API_KEY, "base_url": stub.url, "max_retries": 0},
        ),
        system_prompt="Describe what the cameras see.",
        tools=["runtime_tools:camera"],
        media_store=str(tmp_path / "media"),
    )


def function_call(name: str, args: dict) -> dict:
    part = {"functionCall": {"id": "call-1", "name": name, "args": args}}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{**part, "thoughtSignature": SIGNATURE}]}}
        ]
    }


def text(reply: str) -> dict:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3},
    }


def test_from_config_builds_the_gemini_adapter_with_the_store_and_tools(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    runtime = AgentRuntime.from_config(gemini_config(stub, tmp_path))
    assert isinstance(runtime.model, GeminiChatModel)
    assert runtime.model.media_store is runtime.store
    assert runtime.tools.names == ["camera"]


def test_a_tool_image_reaches_gemini_inside_the_function_response(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    stub.script(function_call("camera", {"name": "north"}), text("A cat on a wall."))
    runtime = AgentRuntime.from_config(gemini_config(stub, tmp_path))
    done = drive(runtime, '{"id": "in-1", "key": "k", "text": "What does north see?"}')

    assert done.output["status"] == "ok" and done.output["text"] == "A cat on a wall."
    assert done.output["tool_calls"] == 1 and done.output["model_calls"] == 2
    assert done.output["usage"] == {"input_tokens": 12, "output_tokens": 3, "cached_tokens": 0}
    first, second = (snake(r.json) for r in stub.requests)
    declared = first["tools"][0]["function_declarations"][0]
    assert declared["name"] == "camera"
    assert first["system_instruction"]["parts"][0]["text"] == "Describe what the cameras see."
    call_turn, result_turn = second["contents"][-2], second["contents"][-1]
    assert call_turn["parts"][0]["thought_signature"] == SIGNATURE
    response = result_turn["parts"][0]["function_response"]
    assert (response["id"], response["name"]) == ("call-1", "camera")
    assert response["response"] == {"result": "picture from north"}
    assert blob_bytes(response["parts"][0]["inline_data"]) == PNG
    # ... while the run's state only ever held a ref to it
    for state in done.states:
        assert len(state.model_dump_json()) < 8192
    image = done.states[-1].messages[-1].parts[1]
    assert image.data is None and image.ref is not None and runtime.store.get(image.ref) == PNG


@pytest.mark.parametrize("status", [400])
def test_a_provider_error_gives_an_error_output_and_a_dead_letter_without_the_key(
    stub: LoopbackStubServer, tmp_path: Path, status: int
) -> None:
    body = {"error": {"code": status, "message": "bad request", "status": "INVALID_ARGUMENT"}}
    stub.script(StubReply(body, status=status))
    raw = '{"id": "in-2", "key": "k", "text": "hello"}'
    done = drive(AgentRuntime.from_config(gemini_config(stub, tmp_path)), raw)
    assert done.output["status"] == "error" and done.output["error"]["type"] == "BadRequest"
    assert done.dead_letter is not None
    assert (done.dead_letter["stage"], done.dead_letter["input"]) == ("run", raw)
    assert done.dead_letter["error_type"] == "BadRequest"
    assert API_KEY not in done.dead_letter["reason"] and API_KEY not in str(done.events)
