"""A replay touches nothing of production's: its own media store (production's is only
read), no MCP server started unless declared `replay: live`, a Python tool's `replay: live`
kept beside MCP tools, and tools that need approval replayed by the recorded decisions."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from engine_harness import harness
from pydantic import ValidationError
from replay_runs import write_log
from spec_files import write_spec

from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.media import MediaStore
from streamagents.jobs.cli.replay import replay_spec
from streamagents.jobs.replay.lines import copy_media, recorded_runs, replay_lines
from streamagents.jobs.spec import JobSpec, SpecError, check_runnable, load_spec
from streamagents.operators.agent import AgentRuntime, tool
from streamagents.operators.agent.config import AgentConfig, ModelSpec, ToolRef
from streamagents.operators.agent.runtime_parts import runtime_parts
from streamagents.operators.agent.tools import Tool, ToolRegistry
from streamagents.testing import EchoTestModel

made: list[str] = []


@tool(requires_approval=True, approval_timeout_s=60)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: Order number.
    """
    made.append(order)
    return f"refunded {order}"


def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: Order number.
    """
    return f"{order}: paid"


def test_tools_that_need_approval_replay_by_the_recorded_decisions(tmp_path: Path) -> None:
    """The recorded run's decision answers the replayed call (approved: its result;
    rejected: the rejection); no replayed run parks, asks anyone or runs the tool."""
    made.clear()
    production = harness(tmp_path / "prod", EchoTestModel(), tools=[refund])
    for key, order in (("yes", "A1"), ("no", "B2")):
        production.send(
            key, json.dumps({"id": f"in-{key}", "key": key, "text": f"tool:refund {order}"})
        )
        production.settle_all()
    asked = {r["key"]: r["call_id"] for r in production.approval_requests()}
    production.decide("yes", asked["yes"])
    production.decide("no", asked["no"], "reject")
    production.settle_all()
    assert made == ["A1"]
    log = write_log(production, tmp_path / "log", "verbose")
    lines, left_out = replay_lines(recorded_runs([log]))
    assert left_out == []
    made.clear()
    replayed = harness(tmp_path / "replay", EchoTestModel(), tools=[refund], replay=True)
    for line in lines:
        replayed.send(json.loads(line)["key"], line)
        replayed.settle_all()
    assert made == [] and replayed.approval_requests() == []
    texts = {o["key"]: o["text"] for o in replayed.outputs()}
    assert texts == {o["key"]: o["text"] for o in production.outputs()}
    assert texts["yes"] == "done: refunded A1"
    assert "rejected" in texts["no"]


def spec(media: Path) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "prod",
            "key": "key",
            "source": {"files": {"path": "in"}},
            "media_store": str(media),
            "agent": {"model": {"provider": "gemini", "model": "m"}},
            "sinks": {"outputs": {"path": "out"}, "dead_letters": {"path": "dead"}},
        }
    )


def test_a_replay_has_its_own_media_store_and_only_reads_productions(tmp_path: Path) -> None:
    production = MediaStore(str(tmp_path / "prod-media"))
    ref = production.put(b"\x89PNG parcel", "image/png")
    before = sorted(p.name for p in (tmp_path / "prod-media").rglob("*"))
    out = tmp_path / "replay"
    replay = replay_spec(spec(tmp_path / "prod-media"), out, out / "inputs.jsonl", None)
    assert replay.media_store == str(out / "media")
    part = {"kind": "image", "mime_type": "image/png", "ref": ref.model_dump(mode="json")}
    gone = {"sha256": "0" * 64, "mime_type": "image/png", "size_bytes": 3}
    line = json.dumps({"id": "i", "key": "k", "parts": [part], "_replay_tools": [gone]})
    scratch = MediaStore(replay.media_store)
    assert copy_media([line], production, scratch) == ["0" * 64]
    assert scratch.get(ref) == b"\x89PNG parcel"
    assert sorted(p.name for p in (tmp_path / "prod-media").rglob("*")) == before


def server(marker: Path) -> McpServer:
    """A stdio server that, once started, leaves `marker` behind (and exits)."""
    return McpServer.model_validate(
        {
            "name": "crm",
            "transport": {
                "type": "stdio",
                "command": sys.executable,
                "args": ["-c", f"open({str(marker)!r}, 'w').close()"],
            },
            "allow": ["*"],
            "connect_timeout_s": 5,
        }
    )


def test_a_replay_starts_no_mcp_server_unless_it_is_declared_live(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    config = AgentConfig(
        model=ModelSpec(provider="gemini", model="m"),
        media_store=str(tmp_path / "media"),
        mcp_servers=[server(marker)],
        replay=True,
    )
    parts = runtime_parts(config, EchoTestModel())
    parts.tools.close()
    assert parts.tools.names == [] and not marker.exists()
    production = runtime_parts(config.model_copy(update={"replay": False}), EchoTestModel())
    production.tools.close()
    assert marker.exists()  # the same server outside a replay is started


def test_replay_live_is_refused_for_a_server_whose_tools_need_approval() -> None:
    with pytest.raises(ValidationError, match="replay: live is refused"):
        McpServer.model_validate(
            {
                "name": "pay",
                "transport": {"type": "stdio", "command": "pay"},
                "allow": ["*"],
                "tool_approval": {"charge": "required"},
                "replay": "live",
            }
        )


class RemoteTool(Tool):
    """A tool answered by an MCP server (as the registry tells it: by its origin)."""

    def origin(self) -> dict[str, str]:
        return {"mcp_server": "crm", "mcp_tool": "find"}


def test_a_python_tools_live_policy_is_kept_beside_mcp_tools(tmp_path: Path) -> None:
    config = AgentConfig(
        model=ModelSpec(provider="gemini", model="m"),
        media_store=str(tmp_path / "media"),
        tools=[ToolRef(ref="test_replay_isolation:lookup", replay="live")],
        replay=True,
    )
    remote = Tool.from_function(lookup, name="mcp__crm__find")
    registry = ToolRegistry([Tool.from_function(lookup), RemoteTool(**remote.__dict__)])
    runtime = AgentRuntime(config, EchoTestModel(), registry, MediaStore(config.media_store))
    assert runtime.replay_policies == {"lookup": "live", "mcp__crm__find": "live"}


APPROVING = """\
name: desk
key: key
source:
  files: {path: in}
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: k}}
  tools:
    - {ref: "replay_runs:send_refund", approval: required}
sinks:
  outputs: {path: out}
  dead_letters: {path: dead}
  approval_requests: {path: asked}
"""


def test_a_spec_whose_tools_need_approval_can_be_replayed(tmp_path: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, APPROVING), {})
    with pytest.raises(SpecError, match="runs wait for approvals"):
        check_runnable(loaded)  # as a production job: its input is read once
    out = tmp_path / "replay"
    replay = replay_spec(loaded.spec, out, out / "inputs.jsonl", None)
    check_runnable(dataclasses.replace(loaded, spec=replay), replay=True)
