"""A cheap loopback model server for `bench_wire.py`, run in its own process.

It speaks just enough of three wires to be answered by their official SDKs — Gemini
`generateContent`, Chat Completions and Responses — with canned bodies: a plain answer,
or, when the request declares the `lookup_order` tool and carries no tool result yet, a
call to it. asyncio streams, HTTP/1.1 keep-alive, a listen backlog of 4096, so the server
costs little per request and never refuses a burst of connections.

Control requests (answered at once, not counted): `POST /control` with
`{"latency_ms": N}` sets the model latency and resets the counters; `GET /stats` returns
them. A UDP datagram on the same port counts as one zero-latency request: the in-process
test double of the benchmark reports its calls that way, so both are timed alike.

Run: `python benchmarks/wire_server.py PORT_FILE` (writes its port to PORT_FILE).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

_TEXT = {
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1},
        "modelVersion": "bench",
    },
    "chat": {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "done"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    },
    "responses": {
        "id": "resp_bench",
        "object": "response",
        "created_at": 0,
        "model": "bench",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_bench",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11},
    },
}
_ARGS = {"order_id": "O-5521"}
_CALL = {
    "gemini": {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"id": "c1", "name": "lookup_order", "args": _ARGS}}
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1},
        "modelVersion": "bench",
    },
    "chat": {
        **_TEXT["chat"],
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": json.dumps(_ARGS)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    },
    "responses": {
        **_TEXT["responses"],
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "lookup_order",
                "arguments": json.dumps(_ARGS),
                "status": "completed",
            }
        ],
    },
}
# Markers of a tool result in each wire's request body (both key spellings for Gemini).
_RESULT_MARKERS = (
    b"functionResponse",
    b"function_response",
    b'"tool_call_id"',
    b"function_call_output",
)


def _response(body: bytes, status: str = "200 OK") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_REPLIES = {
    (wire, tool): _response(json.dumps((_CALL if tool else _TEXT)[wire]).encode())
    for wire in _TEXT
    for tool in (False, True)
}


@dataclass
class Stats:
    """What the server counts between two resets."""

    latency_s: float = 0.0
    requests: int = 0
    first: float | None = None
    last: float | None = None
    busy_s: float = 0.0
    open_now: int = 0
    open_max: int = 0
    cpu_start: float = field(default_factory=time.process_time)
    collector_first: float | None = None
    collector_last: float | None = None

    def report(self) -> dict[str, Any]:
        """The counters as JSON-ready values (times are `time.time()` readings)."""
        window = (self.last - self.first) if self.first and self.last else 0.0
        return {
            "requests": self.requests,
            "first": self.first,
            "last": self.last,
            "mean_in_flight": self.busy_s / window if window > 0 else 0.0,
            "max_in_flight": self.open_max,
            "cpu_s": time.process_time() - self.cpu_start,
            "collector_s": None
            if self.collector_first is None or self.collector_last is None
            else self.collector_last - self.collector_first,
        }


STATS = Stats()


def _wire_of(path: bytes) -> str:
    if path.endswith(b"/chat/completions"):
        return "chat"
    if path.endswith(b"/responses"):
        return "responses"
    return "gemini"


async def _control(path: bytes, body: bytes) -> bytes:
    global STATS
    if path == b"/control":
        STATS = Stats(latency_s=json.loads(body).get("latency_ms", 0) / 1000)
    return _response(json.dumps(STATS.report()).encode())


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            started = time.time()
            request_line, _, headers = head.partition(b"\r\n")
            path = request_line.split(b" ", 2)[1]
            length = 0
            for line in headers.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length) if length else b""
            if path in (b"/control", b"/stats"):
                writer.write(await _control(path, body))
                await writer.drain()
                continue
            stats = STATS
            stats.requests += 1
            stats.first = stats.first or started
            stats.open_now += 1
            stats.open_max = max(stats.open_max, stats.open_now)
            if stats.latency_s:
                await asyncio.sleep(stats.latency_s)
            tool = b"lookup_order" in body and not any(m in body for m in _RESULT_MARKERS)
            writer.write(_REPLIES[(_wire_of(path.split(b"?", 1)[0]), tool)])
            await writer.drain()
            stats.open_now -= 1
            stats.last = time.time()
            stats.busy_s += stats.last - started
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


class _Pings(asyncio.DatagramProtocol):
    """Counts each datagram as one zero-latency request (the in-process test double's calls);
    a datagram holds the seconds the TaskManager's garbage collector has run so far."""

    def datagram_received(self, data: bytes, addr: Any) -> None:
        now = time.time()
        STATS.requests += 1
        STATS.first = STATS.first or now
        STATS.last = now
        STATS.collector_last = float(data)
        if STATS.collector_first is None:
            STATS.collector_first = STATS.collector_last


async def main(port_file: str) -> None:
    """Serve until killed; write the port to `port_file` once listening."""
    server = await asyncio.start_server(_serve, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(_Pings, local_addr=("127.0.0.1", port))
    with open(port_file, "w") as out:
        out.write(str(port))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
