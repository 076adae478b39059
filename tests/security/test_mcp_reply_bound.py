"""A reply over the server's `max_reply_bytes` is cut off on both transports: the call
fails, the session restarts, and the job never holds more of it than the bound."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_http import mcp_http_server

from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.mcp_session import McpCallError, McpSessions

SERVER = Path(__file__).parents[1] / "support" / "mcp_media_server.py"
STDIO = {"type": "stdio", "command": sys.executable, "args": [str(SERVER), "stdio"]}
LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """mcp_media_server over streamable HTTP on 127.0.0.1."""
    with mcp_http_server(lambda port: [str(SERVER), "http", str(port), "tok"]) as url:
        yield url


def _call(sessions: McpSessions, times: int) -> Any:
    return sessions.call("s", "beep", {"times": times}, 60.0, lambda result: result).result(90)


def _bounded(transport: dict[str, Any]) -> None:
    server = McpServer.model_validate(
        {"name": "s", "transport": transport, "allow": ["beep"], "max_reply_bytes": LIMIT}
    )
    sessions = McpSessions([server])
    try:
        assert [t.name for t in sessions.listed_tools()["s"]] != []
        assert not _call(sessions, 10).is_error  # a small reply passes
        started = time.monotonic()
        with pytest.raises(McpCallError, match="it is restarted"):
            _call(sessions, 20_000)  # about 1.7 MB of base64: over the bound
        assert time.monotonic() - started < 30  # cut off, not left to the call timeout
        assert not _call(sessions, 10).is_error  # the restarted session serves again
    finally:
        sessions.close()


def test_a_stdio_reply_over_the_bound_is_cut_off() -> None:
    _bounded(STDIO)


def test_an_http_reply_over_the_bound_is_cut_off(http_url: str) -> None:
    _bounded({"type": "http", "url": http_url, "headers": {"Authorization": "Bearer tok"}})
