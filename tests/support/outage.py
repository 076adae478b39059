"""TEST DOUBLE: a loopback stub responder that plays a provider outage, and the replies of
each wire the failover tests script."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from streamagents.connectors.loopback_stub import RecordedRequest, StubReply

__all__ = ["GEMINI_503", "OutageDouble", "gemini_text", "openai_chat_text", "responses_text"]

GEMINI_503 = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
"""The body of the Gemini API's 503."""


def gemini_text(text: str) -> dict[str, Any]:
    """A generateContent reply with one text part."""
    return {"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": "STOP"}]}


def openai_chat_text(text: str) -> dict[str, Any]:
    """A Chat Completions reply with one assistant message."""
    message = {"role": "assistant", "content": text}
    return {"choices": [{"message": message, "finish_reason": "stop"}]}


def responses_text(text: str) -> dict[str, Any]:
    """A Responses reply with one output message."""
    content = [{"type": "output_text", "text": text}]
    return {
        "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": content}],
    }


class OutageDouble:
    """Test double of a provider that goes down: while `down`, every request is answered
    503 with `error_body`; otherwise `answer(request)` (counted per state in `served`)."""

    def __init__(
        self,
        answer: Callable[[RecordedRequest], dict[str, Any]],
        error_body: dict[str, Any] = GEMINI_503,
    ) -> None:
        self._answer = answer
        self._error_body = error_body
        self._lock = threading.Lock()
        self.down = False
        self.served = {"ok": 0, "503": 0}

    def __call__(self, request: RecordedRequest) -> StubReply:
        with self._lock:
            down = self.down
            self.served["503" if down else "ok"] += 1
        if down:
            return StubReply(self._error_body, status=503)
        return StubReply(self._answer(request))
