"""DEMO / TEST DOUBLE: the demo model's scripted replies, each after a short pause, so a test
can kill a job half-way through its inputs (it paces the job; no test asserts a time).

`streamagents run` imports a demo responder in its own process, from the spec's folder:
a test copies this file next to its spec and names `paced_responder:respond`."""

from __future__ import annotations

import time
from typing import Any

from streamagents.connectors.loopback_stub import RecordedRequest, StubReply
from streamagents.jobs.examples.demo_responder import respond as demo_respond

PAUSE_S = 0.25


def respond(request: RecordedRequest) -> StubReply | dict[str, Any]:
    """The demo's reply to `request`, after `PAUSE_S`."""
    time.sleep(PAUSE_S)
    return demo_respond(request)
