"""A stdio MCP server that fails its first starts: `python mcp_failing_start.py LOG FAILS`
appends the time of each start to LOG, exits at once on the first FAILS starts, and from
then on is `mcp_media_server` over stdio (the restart tests read LOG)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    """Log this start; fail it, or become the media server."""
    log, fails = Path(sys.argv[1]), int(sys.argv[2])
    with log.open("a") as out:
        out.write(f"{time.time()}\n")
    if len(log.read_text().splitlines()) <= fails:
        sys.exit(1)
    server = Path(__file__).with_name("mcp_media_server.py")
    os.execv(sys.executable, [sys.executable, str(server), "stdio"])


if __name__ == "__main__":
    main()
