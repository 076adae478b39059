"""An event on an HTTP MCP server's own event stream (the GET the session holds open for
what the server sends unasked) is bounded by the server's `max_reply_bytes`, as a reply is:
one over it is cut off and the stream reopened, and the session goes on serving calls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_http import mcp_http_server

from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.mcp_session import McpSessions

SERVER = Path(__file__).parents[1] / "support" / "mcp_event_stream_server.py"
LIMIT = 64 * 1024
"""The bound the test sets, far under the SDK's own (1 MiB)."""


@pytest.fixture
def http_url() -> Iterator[str]:
    """mcp_event_stream_server over streamable HTTP on 127.0.0.1."""
    with mcp_http_server(lambda port: [str(SERVER), str(port)]) as url:
        yield url


def _call(sessions: McpSessions, tool: str, **arguments: Any) -> Any:
    return sessions.call("s", tool, arguments, 60.0, lambda result: result).result(90)


def _streams(sessions: McpSessions) -> int:
    return int(_call(sessions, "streams").structured_content["result"])


def _streams_after(sessions: McpSessions, seconds: float) -> int:
    """The server's count of opened event streams once `seconds` have passed."""
    time.sleep(seconds)
    return _streams(sessions)


def test_an_event_over_the_bound_is_cut_off_and_the_session_serves_on(http_url: str) -> None:
    server = McpServer.model_validate(
        {
            "name": "s",
            "transport": {"type": "http", "url": http_url},
            "allow": ["*"],
            "max_reply_bytes": LIMIT,
        }
    )
    sessions = McpSessions([server])
    try:
        assert sorted(t.name for t in sessions.listed_tools()["s"]) == ["announce", "streams"]
        opened = _streams_after(sessions, 1.0)  # the session's stream is open
        assert opened >= 1
        assert not _call(sessions, "announce", size=1000).is_error
        assert _streams_after(sessions, 2.5) == opened  # a small event leaves it open
        assert not _call(sessions, "announce", size=4 * LIMIT).is_error
        assert _streams_after(sessions, 2.5) > opened  # cut off: the client reopened it
        assert not _call(sessions, "announce", size=10).is_error  # the session serves on
        assert sessions.restarts("s") == 0
    finally:
        sessions.close()
