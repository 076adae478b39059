"""The runtime through the real OpenAI Chat Completions adapter against the loopback stub."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from doubles import drive
from runtime_tools import PNG

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.runtime import AgentRuntime


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
