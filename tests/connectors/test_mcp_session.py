"""`McpSessions` restarting a real stdio server (the `mcp` SDK's MCPServer behind a script
that fails its first starts): the wait between starts doubles up to its bound, and starts
over once a session was up."""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import pytest

from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.mcp_session import McpCallError, McpSessions

FAILING_START = Path(__file__).parents[1] / "support" / "mcp_failing_start.py"


def starts(log: Path) -> list[float]:
    """The times the server was started at."""
    return [float(line) for line in log.read_text().splitlines()] if log.exists() else []


def wait_for_starts(log: Path, count: int, timeout_s: float = 60.0) -> list[float]:
    deadline = time.monotonic() + timeout_s
    while len(found := starts(log)) < count:
        assert time.monotonic() < deadline, f"{len(found)} starts of {count}"
        time.sleep(0.05)
    return found


def snapshot(sessions: McpSessions, camera: str) -> str:
    """The text of the server's `snapshot` answer (waiting for a session being started)."""
    call = sessions.call("late", "snapshot", {"camera": camera}, 10.0, lambda result: result)
    return call.result(30).content[0].text


def test_restarts_wait_twice_as_long_each_time_up_to_the_bound_and_start_over_after_a_session(
    tmp_path: Path,
) -> None:
    log = tmp_path / "starts"
    server = McpServer.model_validate(
        {
            "name": "late",
            "transport": {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(FAILING_START), str(log), "5"],
            },
            "allow": ["*"],
            "restart_backoff_s": 0.25,
            "max_restart_backoff_s": 2.0,
        }
    )
    sessions = McpSessions([server])
    try:
        first = wait_for_starts(log, 6)  # five failed starts, then a server that serves
        gaps = [later - earlier for earlier, later in itertools.pairwise(first)]
        assert gaps[0] >= 0.25 and gaps[1] >= 0.5 and gaps[2] >= 1.0 and gaps[3] >= 2.0
        assert 2.0 <= gaps[4] < 3.5  # the bound: 4 s unbounded
        print("waits between starts (s):", [round(gap, 2) for gap in gaps])
        assert snapshot(sessions, "up") == "picture from up"

        crashed = time.time()
        with pytest.raises(McpCallError, match="closed the connection during 'crash'"):
            sessions.call("late", "crash", {}, 10.0, lambda result: result).result(30)
        restarted = wait_for_starts(log, 7)[-1]
        assert 0.25 <= restarted - crashed < 1.5  # back to the first wait: 2 s without
        assert snapshot(sessions, "again") == "picture from again"
        assert sessions.restarts("late") == 6
    finally:
        sessions.close()


MEDIA_SERVER = Path(__file__).parents[1] / "support" / "mcp_media_server.py"


def server_processes() -> list[int]:
    """The pids of this process's children that run the media server (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and MEDIA_SERVER.name.encode() in command:
            found.append(int(entry.name))
    return found


def test_closing_right_after_a_garbled_reply_ends_the_server_process_promptly() -> None:
    server = McpServer.model_validate(
        {
            "name": "media",
            "transport": {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(MEDIA_SERVER), "stdio"],
            },
            "allow": ["*"],
            "restart_backoff_s": 0.05,
        }
    )
    sessions = McpSessions([server])
    try:
        assert sessions.listed_tools()["media"], "the server listed no tools"
        with pytest.raises(McpCallError, match="failed on 'garble'"):
            sessions.call("media", "garble", {}, 10.0, lambda result: result).result(30)
    finally:
        started = time.monotonic()
        sessions.close()
        closed_s = time.monotonic() - started
    deadline = time.monotonic() + 5
    while server_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_processes() == [], "a server process outlived close()"
    assert closed_s < 5, f"close() took {closed_s:.1f} s"
