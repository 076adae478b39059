"""Runs of a replay job on the engine harness: tool calls answered from the recording or by
each tool's replay policy, replay run ids; and what every input event now records for a
replay (the input line, the key's run sequence, the config fingerprint)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from engine_harness import OPEN, EngineHarness, harness
from pydantic import ValidationError
from replay_runs import CALLS, lookup, send_refund, snapshot

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, ModelSpec, ToolRef
from streamagents.operators.agent.replay import REPLAY_OF_FIELD, REPLAY_TOOLS_FIELD
from streamagents.operators.agent.tools import Tool, ToolRegistry
from streamagents.serde.messages import ChatMessage
from streamagents.testing import EchoTestModel

TOOLS = (lookup, snapshot, send_refund)


def _refs(*policies: tuple[str, str]) -> list[ToolRef]:
    return [ToolRef(ref=f"replay_runs:{name}", replay=policy) for name, policy in policies]  # type: ignore[arg-type]


def _replay_line(text: str, recorded: list[dict[str, Any]], input_id: str = "in-1") -> str:
    return json.dumps(
        {
            "id": input_id,
            "key": "k",
            "text": text,
            REPLAY_OF_FIELD: "run-recorded",
            REPLAY_TOOLS_FIELD: recorded,
        }
    )


def _recorded(name: str, arguments: dict[str, Any], text: str) -> dict[str, Any]:
    result = ChatMessage.tool_result("old-call-id", name, text)
    return {"name": name, "arguments": arguments, "result": result.model_dump(mode="json")}


def _tool_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        result
        for e in events
        if e["event_type"] == "tool_response"
        for result in e["payload"]["tool_results"]
    ]


def test_a_recorded_call_is_answered_from_the_recording_without_running_the_tool(
    tmp_path: Path,
) -> None:
    CALLS.clear()
    h = harness(tmp_path, EchoTestModel(), TOOLS, replay=True)
    recorded = [_recorded("lookup", {"order": "O-1"}, "recorded: paid")]
    h.send("k", _replay_line("tool:lookup O-1", recorded))
    h.settle_all()
    [output] = h.outputs()
    assert output["text"] == "done: recorded: paid"
    assert CALLS == {}
    [result] = _tool_results(h.records("events"))
    assert result["tool_call_id"] == "call-0"  # the candidate's call id, the recorded result


def test_arguments_are_compared_as_parsed_json_not_as_text(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), TOOLS, replay=True)
    recorded = [
        {**_recorded("lookup", {"order": "O-2"}, "two"), "arguments": json.loads('{"order":"O-2"}')}
    ]
    h.send("k", _replay_line("tool:lookup O-2", recorded))
    h.settle_all()
    assert h.outputs()[0]["text"] == "done: two"


def test_a_call_the_recording_lacks_gets_an_error_result_under_the_recorded_policy(
    tmp_path: Path,
) -> None:
    CALLS.clear()
    h = harness(tmp_path, EchoTestModel(), TOOLS, replay=True)
    recorded = [_recorded("lookup", {"order": "O-1"}, "recorded: paid")]
    h.send("k", _replay_line("tool:lookup O-7", recorded))  # other arguments
    h.settle_all()
    [result] = _tool_results(h.records("events"))
    assert result["is_error"] is True
    assert (
        "was not called with these arguments in the recorded run run-recorded"
        in (result["content"])
    )
    assert CALLS == {}


def test_a_live_tool_runs_when_the_recording_lacks_the_call(tmp_path: Path) -> None:
    CALLS.clear()
    tools = _refs(("lookup", "live"), ("snapshot", "recorded"), ("send_refund", "recorded"))
    config = AgentConfig(
        model=ModelSpec(provider="test", model="m"),
        media_store=str(tmp_path / "media"),
        replay=True,
        tools=tools,
    )
    h = EngineHarness(
        lambda: AgentRuntime(
            config, EchoTestModel(), ToolRegistry(list(TOOLS)), MediaStore(config.media_store)
        ),
        config,
    )
    OPEN.append(h)  # closed by the conftest, as `harness` does
    h.send("k", _replay_line("tool:lookup O-7;snapshot O-7", []))
    h.settle_all()
    live, recorded_only = _tool_results(h.records("events"))
    assert CALLS == {"lookup": 1}
    assert live["is_error"] is False and "paid" in live["content"]
    assert recorded_only["is_error"] is True


def test_live_replay_is_refused_for_tools_with_side_effects_or_that_need_approval(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValidationError, match="side_effects"):
        ToolRef(ref="replay_runs:send_refund", side_effects=True, replay="live")
    with pytest.raises(ValidationError, match="need approval"):
        ToolRef(ref="replay_runs:send_refund", approval="required", replay="live")
    # a tool that declares approval itself is refused when the replay job starts
    config = AgentConfig(
        model=ModelSpec(provider="test", model="m"),
        media_store=str(tmp_path / "media"),
        replay=True,
        tools=_refs(("send_refund", "live")),
    )
    approving = Tool.from_function(send_refund, requires_approval=True)
    with pytest.raises(ValueError, match="need approval"):
        AgentRuntime(config, EchoTestModel(), ToolRegistry([approving]), None)  # type: ignore[arg-type]


def test_production_runs_ignore_the_replay_fields(tmp_path: Path) -> None:
    CALLS.clear()
    h = harness(tmp_path, EchoTestModel(), TOOLS)
    h.send("k", _replay_line("tool:lookup O-1", [_recorded("lookup", {"order": "O-1"}, "old")]))
    h.settle_all()
    [output] = h.outputs()
    assert output["run_id"].startswith("run-") and CALLS == {"lookup": 1}
    assert all("replay_of" not in e["payload"]["attributes"] for e in h.records("events"))
    assert REPLAY_TOOLS_FIELD not in output["attributes"]


def test_runs_of_a_key_are_numbered_in_keyed_state_and_a_restore_keeps_the_count(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel())
    h.send_input("k", "in-1", "one")
    h.settle_all()
    checkpoint = h.checkpoint()
    h.send_input("k", "in-2", "two")
    h.send_input("other", "in-3", "three")
    h.settle_all()
    h.restore(checkpoint)  # the source sends in-2 and in-3 again
    h.settle_all()
    sequences = {
        e["payload"]["attributes"]["input_id"]: int(e["payload"]["attributes"]["key_sequence"])
        for e in h.records("events")
        if e["event_type"] == "input"
    }
    assert sequences == {"in-1": 0, "in-2": 1, "in-3": 0}


def test_the_input_event_keeps_the_line_as_received_with_its_media_as_refs(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel())
    picture = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(200)).decode()
    line = {
        "id": "in-1",
        "key": "k",
        "text": "see",
        "tier": "gold",
        "parts": [{"kind": "image", "mime_type": "image/png", "data": picture}],
    }
    h.send("k", json.dumps(line))
    h.settle_all()
    [event] = [e for e in h.records("events") if e["event_type"] == "input"]
    kept = json.loads(event["payload"]["input_record"])
    assert kept["tier"] == "gold" and kept["text"] == "see"
    assert "data" not in kept["parts"][0] and kept["parts"][0]["ref"]["size_bytes"] == 208


def test_the_fingerprint_follows_the_prompt_model_and_tools_not_the_input(tmp_path: Path) -> None:
    def fingerprint(tools: tuple[Any, ...] = (), **config: Any) -> str:
        cfg = AgentConfig(
            model=config.pop("model", ModelSpec(provider="test", model="m")),
            media_store=str(tmp_path / "media"),
            **config,
        )
        registry = ToolRegistry(list(tools))
        return AgentRuntime(cfg, EchoTestModel(), registry, None).fingerprint  # type: ignore[arg-type]

    base = fingerprint(system_prompt="Be brief.")
    assert base == fingerprint(system_prompt="Be brief.", max_in_flight=3)
    assert base != fingerprint(system_prompt="Be warm.")
    assert base != fingerprint(
        system_prompt="Be brief.", model=ModelSpec(provider="test", model="n")
    )
    generation = ModelSpec(provider="test", model="m", generation={"temperature": 0.2})
    assert base != fingerprint(system_prompt="Be brief.", model=generation)
    assert base != fingerprint(tools=(lookup,), system_prompt="Be brief.")
