"""MCP servers' tools in the agent runtime, against real MCP servers (`mcp_media_server`, the
`mcp` SDK's MCPServer) over stdio and streamable HTTP on 127.0.0.1, and the real provider
SDKs against the loopback stub."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from doubles import calls_reply, drive, function_responses
from mcp_http import mcp_http_server
from mcp_media_server import PDF, PNG, WAV
from provider_wire import blob_bytes, snake, wire_bytes

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.mcp_tools import add_mcp_tools
from streamagents.operators.agent.runtime_parts import runtime_parts
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.operators.telemetry.spans import spans_from_events
from streamagents.serde.avro import from_record, parsed_schema, record_encoder, to_record
from streamagents.serde.event_payloads import ToolRequestPayload, ToolResponsePayload
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import AudioPart, ChatMessage, DocumentPart, ImagePart, TextPart
from streamagents.testing import ScriptedTestModel, answer, calls

SERVER = Path(__file__).parents[2] / "support" / "mcp_media_server.py"
STDIO = {"type": "stdio", "command": sys.executable, "args": [str(SERVER), "stdio"]}
MEDIA_TOOLS = ["snapshot", "beep", "manual", "find_report", "refuse", "smudge"]


def registry_of(
    store: MediaStore, *servers: dict[str, Any], timeout_s: float = 60.0
) -> ToolRegistry:
    """A registry holding the servers' allowed tools (closed by the caller)."""
    registry = ToolRegistry(timeout_s=timeout_s)
    add_mcp_tools(registry, [McpServer.model_validate(s) for s in servers], store)
    return registry


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MediaStore:
    """The media store every runtime of this module shares with its MCP tools."""
    return MediaStore(str(tmp_path_factory.mktemp("mcp") / "media"))


@pytest.fixture(scope="module")
def media(store: MediaStore) -> Iterator[ToolRegistry]:
    """Two stdio servers (two processes of mcp_media_server): `media` with most tools
    allowed, `gated` whose one allowed tool needs approval."""
    registry = registry_of(
        store,
        {"name": "media", "transport": STDIO, "allow": MEDIA_TOOLS},
        {"name": "gated", "transport": STDIO, "allow": ["snapshot"], "approval": "required"},
    )
    yield registry
    registry.close()


def scripted(media: ToolRegistry, store: MediaStore, *replies: Any) -> AgentRuntime:
    """A runtime over a scripted model and the MCP tools."""
    config = AgentConfig(model=ModelSpec(provider="test", model="scripted"), media_store=store.root)
    return AgentRuntime(config, ScriptedTestModel(list(replies)), media, store)


def on_wire(
    media: ToolRegistry, store: MediaStore, provider: str, stub: LoopbackStubServer
) -> AgentRuntime:
    """A runtime over `provider`'s real SDK against the stub, with the MCP tools."""
    gemini = provider.startswith("gemini")
    config = AgentConfig(
        model=ModelSpec(
            provider=provider,
            model="gemini-3-pro" if gemini else "gpt-test",
            options={
                "api_key": "test-key",
                "base_url": stub.url if gemini else f"{stub.url}/v1",
                "max_retries": 0,
            },
        ),
        media_store=store.root,
    )
    model = runtime_parts(config).model
    return AgentRuntime(config, model, media, store)


def tool_results(runtime: AgentRuntime, call: int = 1) -> list[ChatMessage]:
    """The tool results the scripted model was given in its `call`-th request."""
    assert isinstance(runtime.model, ScriptedTestModel)
    return [m for m in runtime.model.calls[call].messages if m.role == "tool"]


def test_allowed_tools_are_offered_with_their_input_schemas_under_server_names(
    media: ToolRegistry,
) -> None:
    assert sorted(media.names) == sorted(
        [f"mcp__media__{name}" for name in MEDIA_TOOLS] + ["mcp__gated__snapshot"]
    )
    [snapshot] = [s for s in media.specs() if s.name == "mcp__media__snapshot"]
    assert snapshot.description.startswith("Take a picture with a camera.")
    assert snapshot.parameters["properties"]["camera"]["type"] == "string"
    assert snapshot.parameters["required"] == ["camera"]


def test_a_tool_outside_the_allow_list_is_never_offered_and_its_call_is_refused(
    media: ToolRegistry, store: MediaStore
) -> None:
    runtime = scripted(media, store, calls(("mcp__media__delete_everything", {})), answer("ok"))
    assert all("delete_everything" not in spec.name for spec in runtime.tool_specs)
    done = drive(runtime, '{"key": "k", "text": "clean up"}')
    assert done.output["status"] == "ok"
    [result] = tool_results(runtime)
    assert result.is_error
    assert "unknown tool 'mcp__media__delete_everything'" in result.content
    assert "deleted" not in result.content


@pytest.mark.parametrize(
    "provider", ["gemini", "gemini-interactions", "openai", "openai-responses"]
)
def test_an_mcp_png_reaches_the_model_on_every_wire(
    media: ToolRegistry, store: MediaStore, stub: LoopbackStubServer, provider: str
) -> None:
    name, arguments = "mcp__media__snapshot", {"camera": "north"}
    if provider == "gemini":
        first: dict[str, Any] = calls_reply((name, arguments))
        last: dict[str, Any] = {"candidates": [{"content": {"parts": [{"text": "A cat."}]}}]}
    elif provider == "gemini-interactions":
        step = {"type": "function_call", "id": "call-0", "name": name, "arguments": arguments}
        first = {"id": "int-1", "status": "requires_action", "steps": [step]}
        output = {"type": "model_output", "content": [{"type": "text", "text": "A cat."}]}
        last = {"id": "int-2", "status": "completed", "steps": [output]}
    elif provider == "openai":
        call = {"id": "call-0", "type": "function", "function": {"name": name}}
        call["function"]["arguments"] = json.dumps(arguments)
        first = {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
        last = {"choices": [{"message": {"role": "assistant", "content": "A cat."}}]}
    else:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call-0", "name": name}
        first = {"output": [{**item, "arguments": json.dumps(arguments)}]}
        text = {"type": "output_text", "text": "A cat."}
        last = {"output": [{"type": "message", "role": "assistant", "content": [text]}]}
    stub.script(first, last)

    done = drive(on_wire(media, store, provider, stub), '{"key": "k", "text": "north?"}')

    assert done.output["status"] == "ok" and done.output["text"] == "A cat."
    body = stub.requests[1].json
    b64 = base64.b64encode(PNG).decode()
    if provider == "gemini":
        [response] = function_responses(snake(body))
        assert response["name"] == name
        assert response["response"] == {"result": "picture from north"}
        [blob] = [p["inline_data"] for p in response["parts"]]
        assert blob["mime_type"] == "image/png" and blob_bytes(blob) == PNG
    elif provider == "gemini-interactions":
        [result] = [s for s in body["input"] if s["type"] == "function_result"]
        assert (result["call_id"], result["name"]) == ("call-0", name)
        text, image = result["result"]
        assert text == {"type": "text", "text": "picture from north"}
        assert (image["type"], image["mime_type"]) == ("image", "image/png")
        assert wire_bytes(image["data"]) == PNG
    elif provider == "openai":
        messages = body["messages"]
        assert messages[2] == {
            "role": "tool",
            "tool_call_id": "call-0",
            "content": "picture from north",
        }
        image = next(p for p in messages[3]["content"] if p["type"] == "image_url")
        assert image["image_url"]["url"] == f"data:image/png;base64,{b64}"
    else:
        [output] = [i for i in body["input"] if i.get("type") == "function_call_output"]
        assert output["call_id"] == "call-0"
        kinds = {item["type"]: item for item in output["output"]}
        assert kinds["input_text"]["text"] == "picture from north"
        assert kinds["input_image"]["image_url"] == f"data:image/png;base64,{b64}"


def test_the_event_log_and_spans_name_the_server_that_answered(
    media: ToolRegistry, store: MediaStore
) -> None:
    turn = calls(
        ("mcp__media__snapshot", {"camera": "east"}), ("mcp__media__delete_everything", {})
    )
    done = drive(scripted(media, store, turn, answer("ok")), '{"key": "k", "text": "east?"}')
    logged = [
        from_record(_avro_round_trip(to_record(AgentEvent.model_validate(e)))) for e in done.events
    ]
    requests = [e.payload for e in logged if isinstance(e.payload, ToolRequestPayload)]
    responses = [e.payload for e in logged if isinstance(e.payload, ToolResponsePayload)]
    answered, refused = requests
    assert answered.tool_calls[0].name == "mcp__media__snapshot"
    assert (answered.mcp_server, answered.mcp_tool) == ("media", "snapshot")
    assert answered.attributes["mcp_server"] == "media"
    assert (refused.mcp_server, refused.mcp_tool) == (None, None)  # no server answered it
    assert [(r.tool_results[0].name, r.mcp_server, r.mcp_tool) for r in responses] == [
        ("mcp__media__snapshot", "media", "snapshot"),
        ("mcp__media__delete_everything", None, None),
    ]
    [span] = [s for s in spans_from_events(logged) if s.name == "execute_tool mcp__media__snapshot"]
    assert span.attributes["mcp.server"] == "media"
    assert span.attributes["mcp.tool"] == "snapshot"


def _avro_round_trip(record: dict[str, Any]) -> dict[str, Any]:
    """`record` written in Avro binary under the latest schema and read back."""
    written = record_encoder().encode(record)
    return fastavro.schemaless_reader(io.BytesIO(written), parsed_schema())  # type: ignore[return-value]


def test_image_audio_resources_links_and_errors_become_parts_text_and_error_results(
    media: ToolRegistry, store: MediaStore
) -> None:
    turn = calls(
        ("mcp__media__snapshot", {"camera": "west"}),
        ("mcp__media__beep", {"times": 2}),
        ("mcp__media__manual", {"section": "power"}),
        ("mcp__media__find_report", {"name": "q3"}),
        ("mcp__media__refuse", {"reason": "too late"}),
    )
    runtime = scripted(media, store, turn, answer("ok"))
    done = drive(runtime, '{"key": "k", "text": "everything"}')

    assert done.output["status"] == "ok"
    image, audio, manual, link, refused = tool_results(runtime)
    picture = image.parts[1]
    assert isinstance(picture, ImagePart) and picture.ref is not None and picture.data is None
    assert store.get(picture.ref) == PNG and picture.ref.sha256 == _sha256(PNG)
    [sound] = audio.parts
    assert isinstance(sound, AudioPart) and sound.mime_type == "audio/wav"
    assert sound.ref is not None and store.get(sound.ref) == WAV * 2
    pdf, summary = manual.parts
    assert isinstance(pdf, DocumentPart) and pdf.mime_type == "application/pdf"
    assert pdf.ref is not None and store.get(pdf.ref) == PDF
    assert isinstance(summary, TextPart) and summary.text == "Turn it off."
    assert "https://reports.example/q3.pdf" in link.text_parts()[0].text
    assert not any(r.is_error for r in (image, audio, manual, link))
    assert refused.is_error and "refused: too late" in refused.content


def test_an_image_with_broken_base64_is_an_error_result_naming_it_and_the_session_stays(
    media: ToolRegistry, store: MediaStore
) -> None:
    runtime = scripted(
        media,
        store,
        calls(("mcp__media__smudge", {"camera": "west"})),
        calls(("mcp__media__snapshot", {"camera": "west"})),
        answer("ok"),
    )
    done = drive(runtime, '{"key": "k", "text": "west?"}')
    assert done.output["status"] == "ok"
    [smudged] = tool_results(runtime, 1)
    assert smudged.is_error and "image.data: malformed base64" in smudged.content
    assert base64.b64encode(PNG).decode()[:40] not in smudged.content
    after = tool_results(runtime, 2)[-1]
    assert not after.is_error and after.parts[0].text == "picture from west"
    tool = media.get("mcp__media__smudge")
    assert tool is not None and tool.func.sessions.restarts("media") == 0  # type: ignore[attr-defined]


def test_a_server_tool_can_require_approval_and_its_call_parks_the_run(
    media: ToolRegistry, store: MediaStore
) -> None:
    runtime = scripted(media, store, calls(("mcp__gated__snapshot", {"camera": "gate"})))
    runtime.clock_ms = lambda: 1_000_000.0
    step = runtime.start(runtime.parse('{"key": "k", "text": "gate?"}'), [], 1_000_000)
    assert step.state is not None
    outcome = asyncio.run(runtime.perform(step.state, []))
    step = runtime.advance(step.state, outcome, 1_000_010, [])
    assert step.state is not None and step.state.parked
    [request] = step.approval_requests
    assert request.tool == "mcp__gated__snapshot"
    assert request.arguments == {"camera": "gate"}


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


# -- servers that misbehave ---------------------------------------------------------------


@pytest.fixture(scope="module")
def flaky(store: MediaStore) -> Iterator[ToolRegistry]:
    """A stdio server whose `crash` tool ends its process, whose `hang` never answers and
    whose `garble` answers with what is not a tool result; restarts after 0.2 s, a call may
    take 4 s once the server is up."""
    server = {
        "name": "flaky",
        "transport": STDIO,
        "allow": ["snapshot", "crash", "hang", "garble"],
        "call_timeout_s": 4,
        "restart_backoff_s": 0.2,
    }
    registry = registry_of(store, server, timeout_s=120)
    yield registry
    registry.close()


def _sessions_restarts(registry: ToolRegistry) -> int:
    tool = registry.get("mcp__flaky__snapshot")
    assert tool is not None
    return tool.func.sessions.restarts("flaky")  # type: ignore[attr-defined]


@pytest.mark.parametrize("failing", ["crash", "hang", "garble"])
def test_a_crashing_hanging_or_garbling_server_gives_an_error_result_and_later_calls_work(
    flaky: ToolRegistry, store: MediaStore, failing: str
) -> None:
    restarts = _sessions_restarts(flaky)
    runtime = scripted(
        flaky,
        store,
        calls((f"mcp__flaky__{failing}", {})),
        calls(("mcp__flaky__snapshot", {"camera": "after"})),
        answer("ok"),
    )
    done = drive(runtime, '{"key": "k", "text": "try"}')

    assert done.output["status"] == "ok"
    [failed] = tool_results(runtime, 1)
    assert failed.is_error and "MCP server 'flaky'" in failed.content
    if failing == "hang":
        assert "did not answer 'hang' within 4 s" in failed.content
    if failing == "garble":
        assert "failed on 'garble'" in failed.content
        sent = base64.b64encode(PNG).decode()
        assert sent[:16] not in failed.content and sent[-16:] not in failed.content
        assert "not a valid CallToolResult" in failed.content
    after = tool_results(runtime, 2)[-1]
    assert not after.is_error and after.parts[0].text == "picture from after"
    assert _sessions_restarts(flaky) > restarts


def test_a_server_that_answers_garbage_offers_no_tools_and_the_runtime_still_runs(
    store: MediaStore, caplog: pytest.LogCaptureFixture
) -> None:
    garbage = "print('this is not JSON-RPC', flush=True); import time; time.sleep(60)"
    server = {
        "name": "junk",
        "transport": {"type": "stdio", "command": sys.executable, "args": ["-c", garbage]},
        "allow": ["*"],
        "connect_timeout_s": 3,
    }
    with caplog.at_level(logging.WARNING):
        registry = registry_of(store, server)
    try:
        assert registry.names == []
        assert "MCP server 'junk' offers no tools" in caplog.text
        runtime = scripted(registry, store, calls(("mcp__junk__anything", {})), answer("ok"))
        done = drive(runtime, '{"key": "k", "text": "go"}')
        assert done.output["status"] == "ok" and tool_results(runtime)[0].is_error
    finally:
        registry.close()


# -- streamable HTTP ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """mcp_media_server over streamable HTTP on 127.0.0.1, wanting `Bearer s3cret-token-42`."""
    with mcp_http_server(lambda port: [str(SERVER), "http", str(port), "s3cret-token-42"]) as url:
        yield url


def test_a_streamable_http_server_gets_its_headers_and_serves_its_tools(
    http_server: str, store: MediaStore
) -> None:
    transport = {
        "type": "http",
        "url": http_server,
        "headers": {"Authorization": "Bearer s3cret-token-42"},
    }
    registry = registry_of(store, {"name": "remote", "transport": transport, "allow": ["*"]})
    try:
        assert "mcp__remote__snapshot" in registry.names
        runtime = scripted(
            registry, store, calls(("mcp__remote__snapshot", {"camera": "far"})), answer("ok")
        )
        drive(runtime, '{"key": "k", "text": "far?"}')
        [result] = tool_results(runtime)
        picture = result.parts[1]
        assert isinstance(picture, ImagePart) and picture.ref is not None
        assert store.get(picture.ref) == PNG
    finally:
        registry.close()


def test_a_refused_header_offers_no_tools_and_no_log_line_shows_its_value(
    http_server: str, store: MediaStore, caplog: pytest.LogCaptureFixture
) -> None:
    transport = {
        "type": "http",
        "url": http_server,
        "headers": {"Authorization": "Bearer wrong-token-0123456789"},
    }
    server = {"name": "remote", "transport": transport, "allow": ["*"], "connect_timeout_s": 20}
    with caplog.at_level(logging.DEBUG):
        registry = registry_of(store, server)
    try:
        assert registry.names == []
        assert "MCP server 'remote'" in caplog.text
        assert "wrong-token-0123456789" not in caplog.text
        assert "wrong-token" not in repr(McpServer.model_validate(server))
    finally:
        registry.close()
