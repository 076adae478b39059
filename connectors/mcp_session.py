"""MCP sessions through the official `mcp` SDK, on their own asyncio loop and thread.

`McpSessions` runs one supervisor task per server on a loop of its own: it connects (stdio
subprocess or streamable HTTP), initializes, lists the tools, then holds the session until
a call finds it broken (the connection closed, a call timed out or was cancelled, a reply
the SDK could not read); then it closes it (a stdio server's process is ended) and connects
again after a backoff that doubles up to a bound, starting over once a session is up. A
call waits for a session only within its own timeout, so a server that is down gives an
error at once or after that timeout, and the job never fails for it. Messages never show a
server's env or header values. No reply grows past the server's `max_reply_bytes`: a stdio
server runs behind `mcp_stdio_relay`, which ends it at a longer line, and an HTTP response
to a request ends in a read error there; either way the call fails and the session restarts.
An event of an HTTP server's own event stream (the GET open for the session) is bounded the
same: a longer one is cut off and the SDK reopens the stream.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED
from pydantic import ValidationError

from streamagents.connectors.mcp_servers import McpServer, McpStdio
from streamagents.serde.safe_text import clip, scrub

__all__ = ["McpCallError", "McpSessions", "server_stderr"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
_CLOSE_GRACE_S = 6.0
"""How long `McpSessions.close` lets the sessions end themselves before cancelling them."""
_MAX_LIST_PAGES = 100
_STDIO_RELAY = str(Path(__file__).with_name("mcp_stdio_relay.py"))
"""The script a stdio server runs behind (see `mcp_stdio_relay`)."""


class McpCallError(Exception):
    """A tool call the server did not answer with a result: down, timed out, refused."""


def _described(exc: BaseException, secrets: Sequence[str]) -> str:
    """`exc` as one line for an error or a log, without secrets or payloads."""
    while len(getattr(exc, "exceptions", ())) == 1:  # an exception group of one
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, MCPError):
        detail = exc.message
    elif isinstance(exc, ValidationError):  # its str shows the values: a reply's media
        problems = exc.errors(include_input=False, include_url=False)
        detail = f"the reply is not a valid {exc.title}: " + "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in problems[:3]
        )
    else:
        detail = str(exc)
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return clip(scrub(text, secrets), 300)


class _ServerLink:
    """One server's session, kept up by `supervise` and used by `call`."""

    def __init__(self, spec: McpServer) -> None:
        self.spec = spec
        self.secrets = spec.secrets()
        self.tools: list[types.Tool] | None = None
        """The server's tools as first listed (None until a session has listed them)."""
        self.restarts = 0
        """Sessions started after the first one."""
        self.last_error = "not connected yet"
        self._session: ClientSession | None = None
        self._broken = asyncio.Event()
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self.listed = asyncio.Event()
        """Set once the first listing is known (or the first connection failed)."""

    async def supervise(self) -> None:
        """Keep a session up until `close_soon`, restarting it with backoff when it breaks."""
        failures = 0
        while not self._closing.is_set():
            try:
                await self._hold_session()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_error = _described(exc, self.secrets)
                _log.warning("MCP server %r: %s", self.spec.name, self.last_error)
            finally:
                self._ready.clear()
                self._session = None
                self.listed.set()
            delay = min(self.spec.restart_backoff_s * 2**failures, self.spec.max_restart_backoff_s)
            failures += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), delay)
            if self._closing.is_set():
                return
            self.restarts += 1

    def close_soon(self) -> None:
        """End the session the way a broken one ends (the SDK closes its streams and ends a
        stdio server's process), and start no other."""
        self._closing.set()
        self._broken.set()

    async def _hold_session(self) -> None:
        """Connect, initialize and list; then hold the session until a call breaks it."""
        async with AsyncExitStack() as stack:
            streams = await stack.enter_async_context(self._transport(stack))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            with anyio.fail_after(self.spec.connect_timeout_s):
                await session.initialize()
                tools = await _list_tools(session)
            if self.tools is None:
                self.tools = tools
            self._broken = asyncio.Event()
            if self._closing.is_set():
                return
            self._session = session
            self._ready.set()
            self.listed.set()
            await self._broken.wait()
            self._ready.clear()
            self._session = None

    def _transport(self, stack: AsyncExitStack) -> contextlib.AbstractAsyncContextManager[Any]:
        transport = self.spec.transport
        if isinstance(transport, McpStdio):
            # behind the relay that bounds a reply's line (see `mcp_stdio_relay`)
            parameters = StdioServerParameters(
                command=sys.executable,
                args=[
                    "-I",
                    "-S",
                    _STDIO_RELAY,
                    str(self.spec.max_reply_bytes),
                    transport.command,
                    *transport.args,
                ],
                env={k: v.get_secret_value() for k, v in transport.env.items()},
                cwd=transport.cwd,
            )
            return stdio_client(parameters, errlog=server_stderr())
        headers = {k: v.get_secret_value() for k, v in transport.headers.items()}
        # No read timeout: a call's own timeout bounds it, and the server's event stream
        # may stay quiet for long.
        timeout = httpx2.Timeout(self.spec.connect_timeout_s, read=None)
        bounded = _BoundedReplies(httpx2.AsyncHTTPTransport(), self.spec.max_reply_bytes)
        client = httpx2.AsyncClient(headers=headers, timeout=timeout, transport=bounded)
        stack.push_async_callback(client.aclose)
        # Each event of an SSE stream (the server's own GET stream above all) is bounded too.
        return streamable_http_client(
            transport.url, http_client=client, max_sse_event_size=self.spec.max_reply_bytes
        )

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        meta: dict[str, Any] | None = None,
    ) -> Any:
        """The server's `CallToolResult` for one call (`meta`: the request's `_meta`):
        waiting at most `connect_timeout_s` for a session of a server being (re)started, then
        at most `timeout_s` for the answer; anything else is an `McpCallError` saying what
        happened."""
        name = self.spec.name
        if not self._ready.is_set():
            with anyio.move_on_after(self.spec.connect_timeout_s):
                await self._ready.wait()
        session, broken = self._session, self._broken
        if session is None:
            raise McpCallError(
                f"MCP server {name!r} is not connected ({self.last_error}); it is restarted "
                "with backoff, later calls may succeed"
            )
        try:
            with anyio.fail_after(timeout_s):
                return await session.call_tool(tool, arguments, meta=meta)  # type: ignore[arg-type]
        except TimeoutError:
            raise self._break(broken, f"did not answer {tool!r} within {timeout_s:g} s") from None
        except asyncio.CancelledError:
            self._break(broken, f"a call of {tool!r} was given up")  # the server may hang
            raise
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._break(broken, f"closed the connection during {tool!r}") from None
            raise McpCallError(
                f"MCP server {name!r} refused {tool!r}: {_described(exc, self.secrets)}"
            ) from None
        except Exception as exc:
            reason = f"failed on {tool!r} ({_described(exc, self.secrets)})"
            raise self._break(broken, reason) from None

    def _break(self, broken: asyncio.Event, reason: str) -> McpCallError:
        """Mark the session broken for `reason` (the supervisor restarts it); the error."""
        broken.set()
        self.last_error = f"the last session ended: it {reason}"
        return McpCallError(f"MCP server {self.spec.name!r} {reason}; it is restarted")


class _BoundedReplies(httpx2.AsyncBaseTransport):
    """An HTTP transport whose responses to requests (POSTs: each carries one reply) end in
    a `ReadError` past `limit` bytes, so no reply grows without bound in the job; the
    server's own event stream (a GET, open for the session) is bounded per event instead
    (the SDK's `max_sse_event_size`)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """The inner transport's response, its body bounded when it answers a POST."""
        response = await self._inner.handle_async_request(request)
        if request.method != "POST":
            return response
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_BoundedBody(response.stream, self._limit),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body that raises `ReadError` once more than `limit` bytes came."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise httpx2.ReadError(f"the reply is over max_reply_bytes={self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        """Close the inner body."""
        await self._inner.aclose()


def server_stderr() -> TextIO:
    """Where a stdio server's stderr goes: ours when it is a real file; in Flink's Python
    worker it is not (a catcher without `fileno`), then the process's own stderr, or
    /dev/null."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None and stream.fileno() >= 0:
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return _devnull()


@functools.cache
def _devnull() -> TextIO:
    """/dev/null opened once for writing."""
    return open(os.devnull, "w")  # kept open for every server of the process


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server lists, page after page."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_LIST_PAGES):
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


class McpSessions:
    """The MCP sessions of one operator, on their own event loop in a daemon thread."""

    def __init__(self, servers: Sequence[McpServer]) -> None:
        self._links = {spec.name: _ServerLink(spec) for spec in servers}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="streamagents-mcp", daemon=True
        )
        self._thread.start()
        self._tasks = [self._submit(self._start(link)).result() for link in self._links.values()]

    async def _start(self, link: _ServerLink) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(link.supervise())

    def _submit(self, coro: Awaitable[_T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def listed_tools(self) -> dict[str, list[types.Tool]]:
        """Each server's tools, waiting for each at most its `connect_timeout_s`; a server
        that did not list them by then has none here (its error is logged)."""

        async def wait(link: _ServerLink) -> None:
            with anyio.move_on_after(link.spec.connect_timeout_s):
                await link.listed.wait()

        async def wait_all() -> None:
            await asyncio.gather(*(wait(link) for link in self._links.values()))

        self._submit(wait_all()).result()
        listed: dict[str, list[types.Tool]] = {}
        for name, link in self._links.items():
            if link.tools is None:
                _log.warning(
                    "MCP server %r offers no tools: not listed within %g s (%s)",
                    name,
                    link.spec.connect_timeout_s,
                    link.last_error,
                )
            listed[name] = list(link.tools or [])
        return listed

    def restarts(self, server: str) -> int:
        """How many sessions of `server` started after its first."""
        return self._links[server].restarts

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        then: Callable[[Any], _T],
        meta: dict[str, Any] | None = None,
    ) -> concurrent.futures.Future[_T]:
        """Call `tool` of `server` on the sessions' loop, with `meta` as the request's
        `_meta`; `then` (run in a worker thread of that loop) turns the result into what the
        future gives."""

        async def run() -> _T:
            result = await self._links[server].call(tool, arguments, timeout_s, meta)
            return await asyncio.to_thread(then, result)

        return self._submit(run())

    def close(self) -> None:
        """End every session (stdio servers' processes included) and the loop's thread."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            # A session ended by cancellation can leave its server's process running (the
            # SDK's shutdown of the process is cut short), so each is asked to end first.
            for link in self._links.values():
                link.close_soon()
            if not self._tasks:
                return
            _, pending = await asyncio.wait(self._tasks, timeout=_CLOSE_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self._submit(stop()).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
