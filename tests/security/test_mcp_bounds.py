"""A tool server cannot exhaust the job: its media count against `max_tool_result_bytes`
before anything is decoded or stored, and a tool whose schema inlines too large or whose
description is too long is not offered."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from streamagents.connectors.mcp_content import McpResultTooLarge, result_parts
from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.mcp_tools import offered_tool
from streamagents.operators.agent.tools import provider_schema

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16  # about 4 KiB


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize("kind", ["image", "audio", "blob"])
def test_media_over_the_result_limit_is_refused_before_it_is_stored(
    tmp_path: Path, kind: str
) -> None:
    store = MediaStore(str(tmp_path / "media"))
    data = base64.b64encode(PNG).decode()
    block: Any = {
        "image": types.ImageContent(type="image", data=data, mime_type="image/png"),
        "audio": types.AudioContent(type="audio", data=data, mime_type="audio/wav"),
        "blob": types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri="x://a", mime_type="image/png", blob=data),
        ),
    }[kind]
    result = types.CallToolResult(content=[types.TextContent(type="text", text="hi"), block])
    with pytest.raises(McpResultTooLarge, match="max_tool_result_bytes=1024"):
        result_parts(result, store, max_bytes=1024)
    assert _files(tmp_path / "media") == []
    assert len(result_parts(result, store, max_bytes=len(PNG) + 2)) == 2  # at the limit: kept


def _bomb(levels: int) -> dict[str, Any]:
    """A small schema whose `$ref`s inline to 8**levels copies of the innermost type."""
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for level in range(1, levels + 1):
        below = {"$ref": f"#/$defs/d{level - 1}"}
        defs[f"d{level}"] = {"type": "object", "properties": {f"p{i}": below for i in range(8)}}
    return {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{levels}"}}, "$defs": defs}


def test_a_schema_that_inlines_past_its_cap_is_refused_without_being_built() -> None:
    bomb = _bomb(12)  # 8**12 leaves: far past any memory if built
    assert len(json.dumps(bomb)) < 4096
    with pytest.raises(ValueError, match="inlines to more than 65536 bytes"):
        provider_schema(bomb, max_bytes=65536)
    assert provider_schema(_bomb(2), max_bytes=65536)["properties"]["x"]["type"] == "object"


def _server(**caps: Any) -> McpServer:
    stdio = {"type": "stdio", "command": "true"}
    return McpServer.model_validate({"name": "s", "transport": stdio, "allow": ["*"], **caps})


def test_a_tool_over_a_cap_is_not_offered() -> None:
    plain = {"type": "object", "properties": {"q": {"type": "string"}}}
    long = types.Tool(name="chatty", description="x" * 5000, input_schema=plain)
    with pytest.raises(ValueError, match="description of 5000 characters"):
        offered_tool(_server(), long, None, None, 10.0)  # type: ignore[arg-type]
    allowed = offered_tool(_server(max_description_chars=6000), long, None, None, 10.0)  # type: ignore[arg-type]
    assert allowed.name == "mcp__s__chatty"
    bomb = types.Tool(name="bomb", description="b", input_schema=_bomb(12))
    with pytest.raises(ValueError, match="inlines to more than"):
        offered_tool(_server(), bomb, None, None, 10.0)  # type: ignore[arg-type]
