"""A Python MCP server started over streamable HTTP on 127.0.0.1, for the tests that need one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["mcp_http_server"]


@contextmanager
def mcp_http_server(argv: Callable[[int], list[str]]) -> Iterator[str]:
    """Run `python argv(port)` on a free loopback port; yields its MCP URL once it listens,
    and kills it at the end."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, *argv(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
