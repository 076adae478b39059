"""An MCP server's tool inside a real PyFlink job: the session runs in Flink's Python worker."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from doubles import calls_reply, function_responses
from provider_wire import blob_bytes, snake
from pyflink.common import Types
from scripted_job import scripted_environment, stub_gemini

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.flink import agent_stream

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).parents[1] / "support" / "mcp_media_server.py"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One input whose run calls the stdio server's `snapshot`; what the job emitted and
    what the model was sent."""
    root = tmp_path_factory.mktemp("mcp-e2e")
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "A cat."}]}}]}
    with LoopbackStubServer() as stub:
        stub.script(calls_reply(("mcp__media__snapshot", {"camera": "north"})), answer)
        env = scripted_environment()
        config = AgentConfig(
            job_id="mcp-e2e",
            model=stub_gemini(stub.url),
            mcp_servers=[
                {
                    "name": "media",
                    "transport": {
                        "type": "stdio",
                        "command": sys.executable,
                        "args": [str(SERVER), "stdio"],
                    },
                    "allow": ["snapshot"],
                    "connect_timeout_s": 120,
                }
            ],
            media_store=str(root / "media"),
        )
        line = json.dumps({"id": "in-1", "key": "site-1", "text": "What does north see?"})
        records = env.from_collection([line], type_info=Types.STRING())
        streams = agent_stream(records, config)
        tagged = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
            streams.events.map(lambda s: ("event", s), Types.PICKLED_BYTE_ARRAY())
        )
        with tagged.execute_and_collect("mcp-e2e") as results:
            emitted = [(kind, json.loads(text)) for kind, text in results]
        requests = [snake(r.json) for r in stub.requests]
    return {
        "outputs": [v for k, v in emitted if k == "output"],
        "events": [v for k, v in emitted if k == "event"],
        "requests": requests,
    }


def test_an_mcp_tool_runs_in_the_flink_worker_and_its_png_reaches_the_model(
    job: dict[str, Any],
) -> None:
    [output] = job["outputs"]
    assert output["status"] == "ok" and output["text"] == "A cat."
    declared = job["requests"][0]["tools"][0]["function_declarations"]
    assert [d["name"] for d in declared] == ["mcp__media__snapshot"]
    [response] = function_responses(job["requests"][1])
    assert response["response"] == {"result": "picture from north"}
    assert blob_bytes(response["parts"][0]["inline_data"])[:8] == b"\x89PNG\r\n\x1a\n"
    [result] = [e for e in job["events"] if e["event_type"] == "tool_response"]
    assert result["payload"]["tool_results"][0]["name"] == "mcp__media__snapshot"
    assert not result["payload"]["tool_results"][0]["is_error"]
    assert result["payload"]["attributes"] == {"mcp_server": "media", "mcp_tool": "snapshot"}
