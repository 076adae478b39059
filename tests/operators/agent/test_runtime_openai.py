"""The runtime through the real OpenAI Chat Completions adapter against the loopback stub."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from doubles import drive
from runtime_tools import PNG

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import RetryPolicy
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.telemetry.spans import spans_from_events
from streamagents.serde.events import AgentEvent


def test_a_tool_image_reaches_chat_completions_in_the_user_message_after_the_tool_message(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "camera", "arguments": json.dumps({"name": "north"})},
    }
    stub.script(
        {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]},
        {
            "choices": [{"message": {"role": "assistant", "content": "A cat."}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 2},
        },
    )
    config = AgentConfig(
        model=ModelSpec(
            provider="openai",
            model="gpt-test",
            options={"api_key": "test-key", "base_url": f"{stub.url}/v1", "max_retries": 0},
        ),
        tools=["runtime_tools:camera"],
        media_store=str(tmp_path / "media"),
    )
    done = drive(AgentRuntime.from_config(config), '{"key": "k", "text": "north?"}')

    assert done.output["status"] == "ok" and done.output["text"] == "A cat."
    assert done.output["usage"] == {"input_tokens": 20, "output_tokens": 2, "cached_tokens": 0}
    messages = stub.requests[1].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "picture from north",
    }
    image = next(p for p in messages[3]["content"] if p["type"] == "image_url")
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def _retrying_runtime(stub: LoopbackStubServer, max_retries: int) -> AgentRuntime:
    fast = RetryPolicy(initial_delay_s=0.01, max_delay_s=0.05)
    config = AgentConfig(
        model=ModelSpec(
            provider="openai",
            model="gpt-test",
            options={
                "api_key": "test-key",
                "base_url": f"{stub.url}/v1",
                "retry": fast,
                "max_retries": max_retries,
            },
        ),
    )
    return AgentRuntime.from_config(config)


def _error(status: int) -> StubReply:
    body = {"error": {"message": f"status {status} body", "type": "server", "code": "e"}}
    return StubReply(body, status=status)


def test_retried_attempts_reach_the_chat_response_event_and_its_span(
    stub: LoopbackStubServer,
) -> None:
    stub.script(
        _error(429),
        _error(503),
        {"choices": [{"message": {"role": "assistant", "content": "fine"}}]},
    )
    done = drive(_retrying_runtime(stub, 3), '{"key": "k", "text": "hi"}')
    assert done.output["status"] == "ok"
    response = next(e for e in done.events if e["event_type"] == "chat_response")
    assert response["payload"]["attempts"] == 3
    retries = AgentEvent.model_validate(response).payload.retries
    assert [(r.attempt, r.error_type, r.status) for r in retries] == [
        (1, "RateLimited", 429),
        (2, "ServerError", 503),
    ]
    assert "body" not in json.dumps(response)  # facts, never the error bodies

    events = [AgentEvent.model_validate(e) for e in done.events]
    chat = next(s for s in spans_from_events(events) if s.name == "chat gpt-test")
    assert chat.attributes["streamagents.attempts"] == 3
    assert [e.name for e in chat.events] == ["retry", "retry"]
    assert chat.events[0].attributes["http.response.status_code"] == 429
    assert chat.events[1].attributes["error.type"] == "ServerError"
    assert all(chat.start_ns <= e.time_ns <= chat.end_ns for e in chat.events)

    stub.script({"choices": [{"message": {"role": "assistant", "content": "first"}}]})
    done = drive(_retrying_runtime(stub, 3), '{"key": "k", "text": "hi"}')
    response = next(e for e in done.events if e["event_type"] == "chat_response")
    assert response["payload"]["attempts"] == 1
    assert "retries" not in response["payload"]["attributes"]


def test_a_call_that_fails_after_retries_tells_its_attempts_on_the_error_response(
    stub: LoopbackStubServer,
) -> None:
    stub.script(_error(500), _error(500), _error(500))
    done = drive(_retrying_runtime(stub, 2), '{"key": "k", "text": "hi"}')
    assert done.output["status"] == "error"
    response = next(e for e in done.events if e["event_type"] == "chat_response")
    assert response["payload"]["error_class"] == "ServerError"
    assert response["payload"]["attempts"] == 3
    retries = AgentEvent.model_validate(response).payload.retries
    assert [(r.attempt, r.status) for r in retries] == [(1, 500), (2, 500)]
    assert len(stub.requests) == 3
