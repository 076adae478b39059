"""A scripted Gemini wire for the loopback stub: replies chosen by the run's scenario text.

Each input's text starts with `scenario:<name>`; the responder finds the last such text in
a request, counts the model turns after it (the run's step) and answers as the scenario
says: function calls, then a text answer. It records when each request arrived and when
its reply left, so tests can check ordering and concurrency on the wire.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from streamagents.connectors.testing.stub_server import RecordedRequest, StubReply


def snake(value: Any) -> Any:
    """`value` with camelCase keys in snake_case (the SDK mixes both spellings)."""
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def text_reply(text: str) -> dict[str, Any]:
    """A final answer."""
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7},
    }


def calls_reply(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A model turn asking for function calls (with thought signatures to echo)."""
    parts = [
        {
            "functionCall": {"id": f"call-{i}", "name": name, "args": args},
            "thoughtSignature": base64.b64encode(f"sig-{name}".encode()).decode(),
        }
        for i, (name, args) in enumerate(calls)
    ]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 13, "candidatesTokenCount": 3},
    }


@dataclass(frozen=True)
class WireTurn:
    """One request as the script saw it: scenario text, step, body, and its timing."""

    scenario: str
    step: int
    body: dict[str, Any]
    received: float
    replied: float


def texts(content: dict[str, Any]) -> list[str]:
    """The text parts of one content."""
    return [p["text"] for p in content.get("parts", []) if isinstance(p.get("text"), str)]


def function_responses(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every function response in a request, in order."""
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            if "function_response" in part:
                yield part["function_response"]


class GeminiScript:
    """Responder for `LoopbackStubServer` playing the scenarios below; keeps a wire log."""

    def __init__(self) -> None:
        self.turns: list[WireTurn] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> StubReply:
        """Answer one generateContent request."""
        received = time.time()
        body = snake(request.json)
        contents = body.get("contents", [])
        start = max(
            (i for i, c in enumerate(contents) if any(t.startswith("scenario:") for t in texts(c))),
            default=-1,
        )
        if start < 0:
            return StubReply({"error": {"code": 400, "message": "no scenario"}}, status=400)
        text = next(t for t in texts(contents[start]) if t.startswith("scenario:"))
        step = sum(1 for c in contents[start + 1 :] if c.get("role") == "model")
        name = text.split()[0].removeprefix("scenario:")
        reply, delay_s = getattr(self, f"_{name}")(step, text)
        time.sleep(delay_s)
        with self._lock:
            self.turns.append(WireTurn(text, step, body, received, time.time()))
        return reply if isinstance(reply, StubReply) else StubReply(reply)

    def turns_of(self, scenario_prefix: str) -> list[WireTurn]:
        """The logged turns whose scenario text starts with `scenario_prefix`, by step."""
        with self._lock:
            found = [t for t in self.turns if t.scenario.startswith(scenario_prefix)]
        return sorted(found, key=lambda t: (t.step, t.received))

    @staticmethod
    def _image(step: int, text: str) -> tuple[dict[str, Any], float]:
        if step == 0:
            return calls_reply(("make_image", {"seed": 7})), 0.0
        return text_reply("saw picture 7"), 1.5

    @staticmethod
    def _two_step(step: int, text: str) -> tuple[dict[str, Any], float]:
        if step == 0:
            return calls_reply(("lookup_city", {"name": "Paris"})), 0.0
        if step == 1:
            return calls_reply(("weather", {"city": "Paris"})), 0.0
        return text_reply("Paris is sunny"), 0.0

    @staticmethod
    def _parallel(step: int, text: str) -> tuple[dict[str, Any], float]:
        if step == 0:
            return calls_reply(("slow_a", {}), ("slow_b", {})), 0.0
        return text_reply("both done"), 0.0

    @staticmethod
    def _tool_error(step: int, text: str) -> tuple[dict[str, Any], float]:
        if step == 0:
            return calls_reply(("read_sensor", {})), 0.0
        return text_reply("the sensor is offline"), 0.0

    @staticmethod
    def _budget(step: int, text: str) -> tuple[dict[str, Any], float]:
        return calls_reply(("lookup_city", {"name": "Paris"})), 0.0

    @staticmethod
    def _ordered(step: int, text: str) -> tuple[dict[str, Any], float]:
        first = text.endswith("first")
        return text_reply("first done" if first else "second done"), 1.0 if first else 0.0

    @staticmethod
    def _photo(step: int, text: str) -> tuple[dict[str, Any], float]:
        return text_reply("a nice photo"), 0.0

    @staticmethod
    def _plain(step: int, text: str) -> tuple[dict[str, Any], float]:
        return text_reply("ok " + text.split()[-1]), 0.05

    @staticmethod
    def _slow(step: int, text: str) -> tuple[dict[str, Any], float]:
        return text_reply("slow " + text.split()[-1]), 1.0

    @staticmethod
    def _broken(step: int, text: str) -> tuple[StubReply, float]:
        error = {"code": 400, "message": "the stub refuses", "status": "INVALID_ARGUMENT"}
        return StubReply({"error": error}, status=400), 0.0

    @staticmethod
    def _held(step: int, text: str) -> tuple[dict[str, Any], float]:
        return text_reply("held " + text.split()[-1]), 8.0
