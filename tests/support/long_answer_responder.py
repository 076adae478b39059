"""TEST DOUBLE: the demo model's responder, except that a ticket asking for a long answer
gets one of `LONG_ANSWER_CHARS` characters (over Kafka's 1 MiB record limit), and every
reply comes after `PAUSE_S` (so a test can kill a job part of the way through its inputs;
no test asserts a time).

Named as a responder in a spec (`long_answer_responder:respond`); the job's process must
have `tests/support` on its `PYTHONPATH`.
"""

from __future__ import annotations

import time
from typing import Any

from streamagents.connectors.loopback_stub import RecordedRequest, StubReply
from streamagents.jobs.examples.demo_responder import respond as demo_respond

__all__ = ["LONG_ANSWER_CHARS", "LONG_ANSWER_MARKER", "PAUSE_S", "long_answer", "respond"]

LONG_ANSWER_MARKER = "Please answer at great length."
LONG_ANSWER_CHARS = 1_300_000
PAUSE_S = 0.2


def long_answer() -> str:
    """The long answer, the same every time."""
    line = "A long answer, line by line, as the customer asked. "
    return (line * (LONG_ANSWER_CHARS // len(line) + 1))[:LONG_ANSWER_CHARS]


def respond(request: RecordedRequest) -> StubReply | dict[str, Any]:
    """The demo's reply; its final answer replaced by `long_answer()` when the request's
    last message asks for one; after `PAUSE_S`."""
    time.sleep(PAUSE_S)
    reply = demo_respond(request)
    body = request.json
    if not isinstance(reply, dict) or not isinstance(body, dict):
        return reply
    last = (body.get("contents") or [{}])[-1]
    asked = any(LONG_ANSWER_MARKER in part.get("text", "") for part in last.get("parts", []))
    parts = reply["candidates"][0]["content"]["parts"]
    if asked and all("text" in part for part in parts):
        reply["candidates"][0]["content"]["parts"] = [{"text": long_answer()}]
    return reply
