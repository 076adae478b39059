"""TEST DOUBLE, NOT A PROVIDER: a quota for `LoopbackStubServer`, answering 429 past it.

`QuotaDouble` is a responder that enforces a requests-per-window and a tokens-per-window
quota over fixed windows (the first starts with the first request), as a provider's per-minute
quotas do with shorter windows so tests take seconds. A request over either quota is
answered 429 in its API's error format with the time until the window reopens as
`Retry-After` (seconds, fractional) and `retry-after-ms`; it is not counted. Others count
one request and their tokens (the text of the request over 4, plus the reply's
`output_tokens`) and get an ok reply in their API's format (Gemini `generateContent`,
OpenAI Responses or Chat Completions, told by the path) whose usage reports those tokens.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from streamagents.connectors.loopback_stub import RecordedRequest, StubReply

__all__ = ["QuotaDouble", "QuotaFigures"]


@dataclass
class QuotaFigures:
    """What the double saw: answered and refused requests, and when."""

    ok: int = 0
    limited: int = 0
    ok_at: list[float] = field(default_factory=list)
    limited_at: list[float] = field(default_factory=list)
    tokens: int = 0


class QuotaDouble:
    """TEST DOUBLE: answers within `requests`/`tokens` per `window_s`, else 429."""

    def __init__(
        self,
        window_s: float,
        requests: int | None = None,
        tokens: int | None = None,
        output_tokens: int = 8,
    ) -> None:
        self.window_s = window_s
        self.requests = requests
        self.tokens = tokens
        self.output_tokens = output_tokens
        self.started: float | None = None
        """When the first window began (the first request); None before it."""
        self.figures = QuotaFigures()
        self._lock = threading.Lock()
        self._window = 0
        self._used_requests = 0
        self._used_tokens = 0

    def __call__(self, request: RecordedRequest) -> StubReply:
        prompt = _text_chars(request.json) // 4
        cost = prompt + self.output_tokens
        with self._lock:
            now = time.monotonic()
            if self.started is None:
                self.started = now
            window = int((now - self.started) // self.window_s)
            if window != self._window:
                self._window, self._used_requests, self._used_tokens = window, 0, 0
            over_requests = self.requests is not None and self._used_requests >= self.requests
            over_tokens = self.tokens is not None and self._used_tokens + cost > self.tokens
            if over_requests or over_tokens:
                self.figures.limited += 1
                self.figures.limited_at.append(now - self.started)
                reopens = self.started + (window + 1) * self.window_s - now
                return _limited(request.path, reopens, "tokens" if over_tokens else "requests")
            self._used_requests += 1
            self._used_tokens += cost
            self.figures.ok += 1
            self.figures.ok_at.append(now - self.started)
            self.figures.tokens += cost
        return StubReply(_ok(request.path, prompt, self.output_tokens))

    def ok_per_window(self) -> list[int]:
        """Answered requests in each window so far."""
        counts: dict[int, int] = {}
        for at in self.figures.ok_at:
            counts[int(at // self.window_s)] = counts.get(int(at // self.window_s), 0) + 1
        return [counts.get(w, 0) for w in range(max(counts, default=-1) + 1)]


def _text_chars(body: Any) -> int:
    """Characters of text in a request body: every string under a text-like key."""
    if isinstance(body, dict):
        return sum(
            len(v) if k in ("text", "content", "input") and isinstance(v, str) else _text_chars(v)
            for k, v in body.items()
        )
    if isinstance(body, list):
        return sum(_text_chars(item) for item in body)
    return 0


def _limited(path: str, reopens_s: float, kind: str) -> StubReply:
    headers = {
        "Retry-After": f"{reopens_s:.3f}",
        "retry-after-ms": str(math.ceil(reopens_s * 1000)),
    }
    if ":generateContent" in path:
        body: dict[str, Any] = {
            "error": {
                "code": 429,
                "message": f"Resource has been exhausted ({kind} quota).",
                "status": "RESOURCE_EXHAUSTED",
            }
        }
    else:
        body = {
            "error": {
                "message": f"Rate limit reached for {kind}.",
                "type": kind,
                "code": "rate_limit_exceeded",
            }
        }
    return StubReply(body, status=429, headers=headers)


def _ok(path: str, prompt: int, output: int) -> dict[str, Any]:
    if ":generateContent" in path:
        return {
            "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": output},
        }
    usage = {"input_tokens": prompt, "output_tokens": output, "total_tokens": prompt + output}
    if path.endswith("/responses"):
        return {
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                }
            ],
            "usage": usage,
        }
    return {
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": output},
    }
