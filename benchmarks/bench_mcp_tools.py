"""MCP tool calls: time per call through the registry, an MCP server against a local tool.

Run: `python benchmarks/bench_mcp_tools.py [--calls N] [--concurrency C]`. One
`ToolRegistry` holds a local async tool (`echo`, returns its text) and the tools of
`tests/support/mcp_media_server.py` over stdio (a subprocess); N calls each, C at a time,
on one asyncio loop: `snapshot` (text and a 2 KiB PNG, stored in the media store) and
`find_report` (a resource link as text). Printed side by side from one run, with the time
the registry took to start the server and list its tools.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from streamagents.connectors.mcp_servers import McpServer
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.mcp_tools import add_mcp_tools
from streamagents.operators.agent.tools import ToolRegistry, tool
from streamagents.serde.messages import ToolCall

SERVER = Path(__file__).resolve().parents[1] / "tests" / "support" / "mcp_media_server.py"


@tool
async def echo(text: str) -> str:
    """Return the text (the local tool the MCP calls are compared with)."""
    return text


async def _timed(registry: ToolRegistry, call: ToolCall, calls: int, concurrency: int) -> float:
    """Milliseconds per call, `calls` calls with `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            result = await registry.run(call.model_copy(update={"id": f"c{i}"}))
            assert not result.is_error, result.content

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return (time.perf_counter() - started) * 1000 / calls


def main() -> None:
    """Start the server, time each tool, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        store = MediaStore(os.path.join(root, "media"))
        registry = ToolRegistry([echo])
        server = McpServer(
            name="media",
            transport={"type": "stdio", "command": sys.executable, "args": [str(SERVER), "stdio"]},
            allow=["snapshot", "find_report"],
            connect_timeout_s=120,
        )
        started = time.perf_counter()
        add_mcp_tools(registry, [server], store)
        listed_s = time.perf_counter() - started
        cases = {
            "local async tool (echo)": ToolCall(id="c", name="echo", arguments={"text": "hi"}),
            "MCP stdio, text + 2 KiB PNG (snapshot)": ToolCall(
                id="c", name="mcp__media__snapshot", arguments={"camera": "north"}
            ),
            "MCP stdio, resource link (find_report)": ToolCall(
                id="c", name="mcp__media__find_report", arguments={"name": "q3"}
            ),
        }
        figures: dict[str, list[float]] = {name: [] for name in cases}
        try:
            for _ in range(args.rounds):
                for name, call in cases.items():
                    figures[name].append(
                        asyncio.run(_timed(registry, call, args.calls, args.concurrency))
                    )
        finally:
            registry.close()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    print(
        f"python {platform.python_version()}; {args.calls} calls x {args.rounds} rounds, "
        f"{args.concurrency} at a time"
    )
    print(f"server started and its tools listed in {listed_s:.2f} s")
    for name, values in figures.items():
        print(
            f"{name:42} median {statistics.median(values):7.3f} ms/call "
            f"(rounds: {', '.join(f'{v:.3f}' for v in values)})"
        )


if __name__ == "__main__":
    main()
