"""The relay a stdio MCP server runs behind, so that no line it writes can grow without
bound in the job: `python mcp_stdio_relay.py MAX_BYTES COMMAND [ARGS...]`.

The MCP SDK's stdio client buffers a reply until its newline, however long it is (a server
that never writes one fills memory until the call's timeout). The relay starts the server,
passes its stdin through, and copies its stdout on as it comes, counting the bytes since the
last newline: past `MAX_BYTES` it says so on stderr, kills the server and exits, and the
session sees the connection close (and restarts it). Only the standard library is used: it
runs as a script, in a fresh interpreter, before anything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from typing import IO, NoReturn

_CHUNK = 1 << 16


def _pass_stdin(target: IO[bytes]) -> None:
    """Copy our stdin to the server's until either ends."""
    source = sys.stdin.buffer
    try:
        while chunk := source.read1(_CHUNK):
            target.write(chunk)
            target.flush()
    except OSError:
        pass  # the server is gone
    finally:
        with contextlib.suppress(OSError):
            target.close()


def relay(limit: int, command: list[str]) -> int:
    """Run `command` behind the relay; its exit status, or 1 when a line was over `limit`."""
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert server.stdin is not None and server.stdout is not None

    def stop(signum: int, _frame: object) -> NoReturn:
        server.terminate()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=_pass_stdin, args=(server.stdin,), daemon=True).start()
    out = sys.stdout.buffer
    pending = 0  # bytes of the line not yet ended
    while chunk := server.stdout.read(_CHUNK):  # unbuffered: what the server wrote so far
        *ended, rest = chunk.split(b"\n")
        lengths = [pending + len(ended[0]), *map(len, ended[1:])] if ended else []
        pending = len(rest) if ended else pending + len(rest)
        if max(lengths, default=0) > limit or pending > limit:
            sys.stderr.write(
                f"streamagents: the MCP server wrote a reply of more than max_reply_bytes="
                f"{limit} bytes; it is stopped\n"
            )
            server.kill()
            server.wait()
            return 1
        out.write(chunk)
        out.flush()
    return server.wait()


if __name__ == "__main__":
    status = relay(int(sys.argv[1]), sys.argv[2:])
    sys.stdout.flush()
    # at once: the stdin thread may sit in a read, which a normal shutdown would wait on
    os._exit(status)
