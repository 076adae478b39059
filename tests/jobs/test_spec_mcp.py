"""`agent.mcp_servers` in the job spec: the docs' example, and bad entries named clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.connectors.mcp_servers import McpHttp, McpStdio
from streamagents.jobs.cli.main import main
from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import SpecError, check_runnable, load_spec

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mcp-tools.md"
ENV = {"GEMINI_API_KEY": "g-key", "CAMERA_API_TOKEN": "cam-0123456789", "TICKETS_TOKEN": "t-42"}


def docs_example() -> str:
    page = DOCS.read_text()
    return page.split("<!-- mcp-example -->")[1].split("```yaml\n")[1].split("```")[0]


def test_the_docs_complete_mcp_example_is_a_valid_spec_that_reaches_the_agent_config(
    tmp_path: Path,
) -> None:
    loaded = load_spec(write_spec(tmp_path, docs_example()), ENV)
    check_runnable(loaded)
    cameras, tickets = agent_config(loaded, model_spec(loaded.model)).mcp_servers
    assert isinstance(cameras.transport, McpStdio) and isinstance(tickets.transport, McpHttp)
    assert cameras.transport.env["CAMERA_API_TOKEN"].get_secret_value() == "cam-0123456789"
    assert tickets.transport.headers["Authorization"].get_secret_value() == "Bearer t-42"
    assert cameras.allows("snapshot") and not cameras.allows("delete_footage")
    assert tickets.needs_approval("close_ticket") and not tickets.needs_approval("find_ticket")
    assert "cam-0123456789" not in repr(cameras) and "t-42" not in repr(tickets)


def _problems(tmp_path: Path, old: str, new: str, runnable: bool = False) -> str:
    text = docs_example()
    assert old in text
    with pytest.raises(SpecError) as caught:
        loaded = load_spec(write_spec(tmp_path, text.replace(old, new, 1)), ENV)
        if runnable:
            check_runnable(loaded)
    return str(caught.value)


def test_a_bad_server_name_is_named_with_its_line(tmp_path: Path) -> None:
    message = _problems(tmp_path, "name: cameras", "name: Cameras_1")
    assert "job.yaml:13: agent.mcp_servers[0].name" in message


def test_an_unknown_transport_type_is_named(tmp_path: Path) -> None:
    message = _problems(tmp_path, "type: http", "type: websocket")
    assert "agent.mcp_servers[1].transport" in message and "websocket" in message


def test_approval_for_a_tool_not_allowed_is_refused(tmp_path: Path) -> None:
    message = _problems(tmp_path, "{close_ticket: required}", "{reopen_ticket: required}")
    assert "agent.mcp_servers[1]" in message
    assert "tool_approval names tools not in allow: reopen_ticket" in message


def test_two_servers_of_one_name_are_refused(tmp_path: Path) -> None:
    message = _problems(tmp_path, "name: tickets", "name: cameras")
    assert "MCP server names must be unique; given twice: cameras" in message


def test_tools_needing_approval_need_the_approval_requests_sink(tmp_path: Path) -> None:
    message = _problems(tmp_path, "  approval_requests: {path: out/approvals}\n", "", runnable=True)
    assert "agent.mcp_servers[1]" in message
    assert "MCP server 'tickets' has tools whose calls need approval" in message


def test_validate_names_a_bad_entry_and_never_prints_a_header_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    spec = write_spec(
        tmp_path, docs_example().replace("allow: [snapshot, list_cameras]", "allow: []")
    )
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "agent.mcp_servers[0].allow" in err
    assert "t-42" not in err and "cam-0123456789" not in err
