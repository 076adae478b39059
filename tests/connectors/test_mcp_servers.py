"""MCP server settings: the names their tools get, allow-lists, approvals, secrets."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streamagents.connectors.mcp_servers import McpServer, mcp_tool_name, split_mcp_tool_name
from streamagents.connectors.mcp_session import server_stderr
from streamagents.serde.chat import ToolSpec

SERVER_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,19}", fullmatch=True)
STDIO = {"type": "stdio", "command": "python"}


@given(server=SERVER_NAMES, tool=st.text(min_size=1, max_size=30))
def test_a_tool_name_always_gives_back_its_server_and_is_a_valid_tool_name(
    server: str, tool: str
) -> None:
    name = mcp_tool_name(server, tool)
    split = split_mcp_tool_name(name)
    assert split is not None and split[0] == server
    assert len(split[1]) == len(tool)
    if len(name) <= 64:
        ToolSpec(name=name, description="", parameters={"type": "object"})


@pytest.mark.parametrize("name", ["lookup_order", "mcp_files_read", "mcp__", "mcp__A__x"])
def test_names_of_other_tools_name_no_server(name: str) -> None:
    assert split_mcp_tool_name(name) is None


def test_allow_star_offers_every_tool_and_a_list_only_its_names() -> None:
    everything = McpServer(name="fs", transport=STDIO, allow=["*"])
    some = McpServer(name="fs", transport=STDIO, allow=["read"])
    assert everything.allows("delete") and some.allows("read") and not some.allows("delete")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"allow": []}, "at least 1 item"),
        ({"allow": ["*", "read"]}, '"*" allows every tool'),
        ({"name": "My_Server"}, "should match pattern"),
        ({"tool_approval": {"write": "required"}}, "tool_approval names tools not in allow: write"),
        ({"restart_backoff_s": 5, "max_restart_backoff_s": 1}, "max_restart_backoff_s"),
        ({"transport": {"type": "http", "url": "ftp://x"}}, "should match pattern"),
        ({"transport": {"type": "stdio"}}, "command"),
    ],
)
def test_bad_settings_are_refused_naming_the_rule(fields: dict, message: str) -> None:
    settings = {"name": "fs", "transport": STDIO, "allow": ["read"], **fields}
    with pytest.raises(ValidationError, match=message):
        McpServer.model_validate(settings)


def test_approval_is_per_server_with_per_tool_overrides() -> None:
    server = McpServer(
        name="fs",
        transport=STDIO,
        allow=["read", "write"],
        approval="required",
        tool_approval={"read": "none"},
    )
    assert server.needs_approval("write") and not server.needs_approval("read")


def test_env_and_header_values_are_secrets_that_no_repr_shows() -> None:
    stdio = McpServer(name="a", transport={**STDIO, "env": {"TOKEN": "env-secret-1"}}, allow=["*"])
    http = McpServer(
        name="b",
        transport={
            "type": "http",
            "url": "http://127.0.0.1:1/mcp",
            "headers": {"Authorization": "Bearer hdr-secret-2"},
        },
        allow=["*"],
    )
    assert "env-secret-1" not in repr(stdio) and "hdr-secret-2" not in repr(http)
    assert "hdr-secret-2" not in http.model_dump_json()
    assert stdio.secrets() == ["env-secret-1"]
    assert http.secrets() == ["Bearer hdr-secret-2", "hdr-secret-2"]


class _StdErrCatcher:
    """Test double of what Flink's Python worker puts in `sys.stderr`: no `fileno`."""

    def write(self, text: str) -> int:
        return len(text)


def test_a_stdio_server_gets_a_real_stderr_inside_flinks_python_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", _StdErrCatcher())
    stream = server_stderr()
    assert stream.fileno() >= 0 and stream is not sys.stderr
