"""A real MCP server (the `mcp` SDK's MCPServer) the MCP tool tests start in a subprocess.

`python mcp_media_server.py stdio` serves on stdin/stdout; `python mcp_media_server.py http
PORT TOKEN` serves streamable HTTP on 127.0.0.1:PORT at /mcp and answers 401 to a request
whose `Authorization` header is not `Bearer TOKEN`. Its tools return every kind of MCP
content (text, a PNG, audio, embedded resources, a resource link, an error), and three
misbehave on purpose: `crash` ends the process, `hang` never answers, `garble` answers
with a reply that is not a tool result (over stdio).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Audio

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
"""The PNG bytes `snapshot` returns (a signature and 2 KiB of payload)."""

WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(64))
"""The WAV bytes `beep` returns."""

PDF = b"%PDF-1.4\n% streamagents test manual\n%%EOF\n"
"""The PDF bytes `manual` embeds."""

server = MCPServer("media")

_wire: list[int] = []
"""A duplicate of stdout taken before the SDK diverts it (stdio only): `garble` writes there."""


@server.tool()
def snapshot(camera: str) -> list[types.ContentBlock]:
    """Take a picture with a camera.

    Args:
        camera: Which camera, e.g. "north".
    """
    image = types.ImageContent(
        type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"
    )
    return [types.TextContent(type="text", text=f"picture from {camera}"), image]


@server.tool()
def beep(times: int) -> Audio:
    """Play a beep and return the recording."""
    return Audio(data=WAV * times, format="wav")


@server.tool()
def manual(section: str) -> list[types.EmbeddedResource]:
    """The manual's section as a PDF and its summary as a text resource."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri=f"docs://manual/{section}.pdf",
                mime_type="application/pdf",
                blob=base64.b64encode(PDF).decode(),
            ),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri=f"docs://manual/{section}.txt", mime_type="text/plain", text="Turn it off."
            ),
        ),
    ]


@server.tool()
def find_report(name: str) -> types.ResourceLink:
    """Where a report can be read."""
    return types.ResourceLink(
        type="resource_link", name=name, uri=f"https://reports.example/{name}.pdf"
    )


@server.tool()
def smudge(camera: str) -> types.ImageContent:
    """A picture whose base64 is broken (the PNG's text with a character base64 has not)."""
    data = base64.b64encode(PNG).decode()
    return types.ImageContent(type="image", data=f"{data[:40]}*{data[40:]}", mime_type="image/png")


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def crash() -> str:
    """Ends the server's process without answering."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answers."""
    while True:
        time.sleep(1)


@server.tool()
def garble(ctx: Context) -> str:
    """Answers its call, on stdout past the SDK, with a result that is not a tool result
    (the PNG as an image without a mime type), then never answers again (stdio only)."""
    request_id: int | str = int(ctx.request_id) if ctx.request_id.isdigit() else ctx.request_id
    image = {"type": "image", "data": base64.b64encode(PNG).decode()}
    reply = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [image]}}
    os.write(_wire[0], json.dumps(reply).encode() + b"\n")
    while True:
        time.sleep(1)


@server.tool()
def request_meta(ctx: Context) -> str:
    """The `_meta` of its own request, as JSON (what a client sent along with the call)."""
    meta = ctx.request_context.meta
    return json.dumps(dict(meta) if meta else {}, sort_keys=True, default=str)


@server.tool()
def delete_everything() -> str:
    """A tool no agent should be offered."""
    return "deleted"


def _http_app(token: str) -> Any:
    """The streamable HTTP app behind a check of the bearer token."""
    app = server.streamable_http_app()
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] == "http" and headers.get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    """Serve over the transport the command line names."""
    if sys.argv[1] == "stdio":
        _wire.append(os.dup(1))
        server.run("stdio")
        return
    import uvicorn

    port, token = int(sys.argv[2]), sys.argv[3]
    uvicorn.run(_http_app(token), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
