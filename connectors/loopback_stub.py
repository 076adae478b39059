"""TEST DOUBLE, NOT A MODEL: a loopback HTTP stub that records requests and replays replies.

Nothing here thinks or writes: it binds 127.0.0.1 only, stores every request (path,
headers, JSON body) and answers each one with the next scripted `StubReply`, or with what
a responder function decides from the request. Replies can be delayed, carry any status
and headers (429 with Retry-After, 500, ...), be malformed bytes, or be no reply at all (the
stub closes the connection unanswered), so the real SDKs can be exercised against every
fault. Tests use it, and so does the demo mode of a job
(`jobs/model_choice.py`), which must say loudly that its answers are canned.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CachedContentsDouble", "LoopbackStubServer", "RecordedRequest", "StubReply"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stub received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class StubReply:
    """A reply to play back: status, JSON (or raw bytes) body, headers, and a delay."""

    body: Any = field(default_factory=dict)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    """Send nothing: close the connection after the delay, as a crashed server would."""

    def encoded(self) -> bytes:
        """The body as bytes: raw bytes as given, anything else as JSON."""
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()


Responder = Callable[[RecordedRequest], "StubReply | dict[str, Any]"]


class _ReusableServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client left before its reply (a timeout test did that on purpose)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class LoopbackStubServer:
    """Test double, not a model: records requests on 127.0.0.1 and answers from a script."""

    def __init__(self, responder: Responder | None = None, port: int = 0) -> None:
        self._responder = responder
        self._script: deque[StubReply] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._server = _ReusableServer(("127.0.0.1", port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:40123 (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: StubReply | dict[str, Any]) -> None:
        """Queue replies, answered in order before the responder is asked."""
        with self._lock:
            self._script.extend(r if isinstance(r, StubReply) else StubReply(r) for r in replies)

    def start(self) -> LoopbackStubServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="loopback-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackStubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _reply_for(self, request: RecordedRequest) -> StubReply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        if self._responder is None:
            return StubReply({"error": {"message": "stub has no reply scripted"}}, status=500)
        reply = self._responder(request)
        return reply if isinstance(reply, StubReply) else StubReply(reply)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; without TCP_NODELAY the body
            # waits on the client's delayed ACK (~40 ms per keep-alive request).
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                reply = stub._reply_for(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.drop:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                payload = reply.encoded()
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = _serve
            do_GET = _serve
            do_DELETE = _serve
            do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


_BYTES_PER_TOKEN = 4
"""The double's token count: one token per 4 bytes of request JSON (a stand-in, not a model)."""


class CachedContentsDouble:
    """TEST DOUBLE, NOT A SERVER: Gemini's `cachedContents` endpoints kept in memory, as a
    responder for `LoopbackStubServer`.

    Creating a cache stores what was sent and names it `cachedContents/stub-N`; its token
    count is the JSON size of what it holds over 4. `evict()` forgets caches as the server
    does when their TTL elapses. A `generateContent` request naming a cache it does not hold
    is answered 404 NOT_FOUND; other requests go to `generate`, and the reply's usage gets
    `promptTokenCount` (request JSON size over 4, plus the cache's tokens) and
    `cachedContentTokenCount`. With `count_tokens=False` the reply's own prompt count is
    kept, and only a cache's tokens are added to it."""

    def __init__(self, generate: Responder, count_tokens: bool = True) -> None:
        self._generate = generate
        self._count_tokens = count_tokens
        self._lock = threading.Lock()
        self.live: dict[str, dict[str, Any]] = {}
        self.created: list[str] = []
        self.not_found = 0
        self.refuse_creation: dict[str, Any] | None = None
        """When set, creation is answered 400 with this error body (a refusing backend)."""

    def evict(self, name: str | None = None) -> None:
        """Forget one cache, or all of them."""
        with self._lock:
            if name is None:
                self.live.clear()
            else:
                self.live.pop(name, None)

    def __call__(self, request: RecordedRequest) -> StubReply:
        path = request.path.split("?")[0]
        if "/cachedContents" in path:
            return self._cached_contents(request, path)
        body = request.json or {}
        name = body.get("cachedContent")
        cached_tokens = 0
        if name:
            with self._lock:
                held = self.live.get(name)
                if held is None:
                    self.not_found += 1
            if held is None:
                return StubReply(_error(404, "NOT_FOUND", f"CachedContent not found: {name}"), 404)
            cached_tokens = held["usageMetadata"]["totalTokenCount"]
        reply = self._generate(request)
        reply = reply if isinstance(reply, StubReply) else StubReply(reply)
        if reply.status != 200 or not isinstance(reply.body, dict):
            return reply
        if not (self._count_tokens or cached_tokens):
            return reply
        usage = dict(reply.body.get("usageMetadata") or {})
        sent = len(request.body) // _BYTES_PER_TOKEN
        prompt = sent if self._count_tokens else usage.get("promptTokenCount", 0)
        usage["promptTokenCount"] = prompt + cached_tokens
        if cached_tokens:
            usage["cachedContentTokenCount"] = cached_tokens
        return StubReply({**reply.body, "usageMetadata": usage}, headers=reply.headers)

    def _cached_contents(self, request: RecordedRequest, path: str) -> StubReply:
        name = path[path.index("cachedContents") :]
        with self._lock:
            if request.method == "POST":
                if self.refuse_creation is not None:
                    return StubReply(self.refuse_creation, 400)
                name = f"cachedContents/stub-{len(self.created) + 1}"
                held = {
                    **(request.json or {}),
                    "name": name,
                    "usageMetadata": {"totalTokenCount": len(request.body) // _BYTES_PER_TOKEN},
                }
                self.live[name] = held
                self.created.append(name)
                return StubReply(held)
            held = self.live.get(name)
            if held is None:
                return StubReply(_error(404, "NOT_FOUND", f"CachedContent not found: {name}"), 404)
            if request.method == "DELETE":
                del self.live[name]
                return StubReply({})
            if request.method == "PATCH":
                held.update(request.json or {})
            return StubReply(held)


def _error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "status": status, "message": message}}
