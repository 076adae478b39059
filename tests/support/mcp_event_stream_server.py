"""A real MCP server whose own event stream (the GET a client holds open) the tests can fill.

`python mcp_event_stream_server.py PORT` serves streamable HTTP on 127.0.0.1:PORT at /mcp.
`announce(size)` sends a notification of about `size` bytes on the session's own stream
(not the answer's), and `streams()` says how many times a client opened that stream: a
client that cut an event off reconnects, so the count grows.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("event-stream")

_opened: list[int] = [0]
"""How many GET requests (event streams) the server has been sent."""


@server.tool()
async def announce(size: int, ctx: Context) -> str:
    """Send a resource-updated notification whose URI is about `size` bytes long, on the
    session's own event stream."""
    await ctx.session.send_resource_updated("notes://" + "n" * size)
    return "announced"


@server.tool()
def streams() -> int:
    """How many times a client opened the server's event stream."""
    return _opened[0]


def _counting_app() -> Any:
    """The streamable HTTP app, counting the GET requests that open an event stream."""
    app = server.streamable_http_app()

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            _opened[0] += 1
        await app(scope, receive, send)

    return counted


def main() -> None:
    """Serve streamable HTTP on the port the command line names."""
    import uvicorn

    uvicorn.run(_counting_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")


if __name__ == "__main__":
    main()
