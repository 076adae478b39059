"""Test doubles, one module: nothing here is a model or a provider a user could pick.

- `scripted_runtime`: a runtime over `streamagents.testing.ScriptedTestModel`, for
  agent-runtime tests that need no wire; `drive` runs a whole run through a runtime.
- `GeminiScript`: a scripted Gemini wire for the loopback stub, replies chosen by the
  run's scenario text. Each input's text starts with `scenario:<name>`; the responder
  finds the last such text in a request, counts the model turns after it (the run's
  step) and answers as the scenario says: function calls, then a text answer. It records
  when each request arrived and when its reply left, so tests can check ordering and
  concurrency on the wire.
- `InteractionsPhotoScript`: a scripted Interactions API for the loopback stub: asked
  `scenario:photo <n>` it calls `make_image(seed=n)`, and continuing that stored
  interaction it answers whether the image in the `function_result` is picture n.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from e2e_tools import image_bytes
from provider_wire import snake, wire_bytes

from streamagents.connectors.loopback_stub import RecordedRequest, StubReply
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import (
    AgentConfig,
    AgentRuntime,
    ModelSpec,
    Outcome,
    RunState,
    Step,
    ToolRegistry,
)
from streamagents.operators.agent.emitted_records import ApprovalRequest, DeadLetter, OutputRecord
from streamagents.serde.messages import ChatMessage
from streamagents.testing import Reply, ScriptedTestModel


def scripted_runtime(
    tmp_path: Any, replies: Sequence[Reply], tools: Sequence[Any] = (), **config: Any
) -> Any:
    """An AgentRuntime over a ScriptedTestModel, the given tools and a store under tmp_path."""
    config.setdefault("model", ModelSpec(provider="test", model="scripted"))
    cfg = AgentConfig(media_store=str(tmp_path / "media"), **config)
    model = ScriptedTestModel(list(replies))
    return AgentRuntime(cfg, model, ToolRegistry(tools), MediaStore(cfg.media_store))


class StepFailsRuntime(AgentRuntime):
    """Test double: the real runtime, except that for inputs whose id starts with `abandon-`
    the step after a call raises, as a bug would; the engine then abandons the run."""

    def advance(
        self,
        state: RunState,
        outcome: Outcome,
        now_ms: int,
        history: Sequence[ChatMessage] | None = None,
    ) -> Step:
        """Raise for `abandon-` inputs; otherwise advance as the real runtime does."""
        if state.input_id.startswith("abandon-"):
            raise RuntimeError("the step after the call failed")
        return super().advance(state, outcome, now_ms, history)


@dataclass
class Finished:
    """Everything a driven run produced."""

    steps: list[Any]
    events: list[dict[str, Any]]
    output: dict[str, Any]
    dead_letter: dict[str, Any] | None
    history: list[ChatMessage] | None
    states: list[Any]


def emitted_json(record: OutputRecord | DeadLetter | ApprovalRequest | None) -> dict[str, Any]:
    """The JSON object a record is emitted as (`to_json()`, parsed); {} for None."""
    import json

    return {} if record is None else json.loads(record.to_json())


def drive(
    runtime: Any,
    raw: str,
    history: Sequence[ChatMessage] = (),
    now_ms: int = 1_000_000,
    step_ms: int = 10,
) -> Finished:
    """Run one input to completion the way the engine does: start, then perform/advance."""
    import json

    record = runtime.parse(raw)
    runtime.clock_ms = lambda: float(now_ms)
    step = runtime.start(record, list(history), now_ms)
    steps, states = [step], []
    while step.state is not None:
        states.append(step.state)
        outcome = asyncio.run(runtime.perform(step.state, list(history)))
        now_ms += step_ms
        step = runtime.advance(step.state, outcome, now_ms, list(history))
        steps.append(step)
    from streamagents.serde.events import AgentEvent

    for event in (e for s in steps for e in s.events):
        AgentEvent.model_validate_json(event.json())  # every record is a valid event-log event
    events = [json.loads(e.json()) for s in steps for e in s.events]
    return Finished(
        steps=steps,
        events=events,
        output=emitted_json(step.output),
        dead_letter=emitted_json(step.dead_letter) if step.dead_letter else None,
        history=step.history,
        states=states,
    )


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

    def __init__(self, held_s: float = 8.0) -> None:
        self.turns: list[WireTurn] = []
        self.held_s = held_s
        """How long a `scenario:held` call waits before its answer (a test may change it)."""
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
    def _exits(step: int, text: str) -> tuple[dict[str, Any], float]:
        if step == 0:
            return calls_reply(("strict_cli", {"flag": "--bogus"}), ("interrupted", {})), 0.0
        return text_reply("the tools refused"), 0.0

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
    def _refund(step: int, text: str) -> tuple[dict[str, Any], float]:
        if step == 0:
            return calls_reply(("refund_order", {"order": text.split()[-1], "amount": 30})), 0.0
        return text_reply("refund handled"), 0.0

    @staticmethod
    def _followup(step: int, text: str) -> tuple[dict[str, Any], float]:
        """`scenario:followup <after_s> <scenario> <tag>[, ...]`: schedule one follow-up per
        entry, whose note is `scenario:<scenario> fired-<tag>`, then answer."""
        if step > 0:
            return text_reply("I will check back"), 0.0
        entries = [entry.split() for entry in text.removeprefix("scenario:followup ").split(",")]
        return calls_reply(
            *(
                (
                    "schedule_followup",
                    {"after_s": float(after), "note": f"scenario:{kind} fired-{tag}"},
                )
                for after, kind, tag in entries
            )
        ), 0.0

    def _held(self, step: int, text: str) -> tuple[dict[str, Any], float]:
        return text_reply("held " + text.split()[-1]), self.held_s


class InteractionsPhotoScript:
    """Responder for `LoopbackStubServer` playing an Interactions API model that reads a
    tool's picture from the `function_result` step of a continued interaction.

    A request without `previous_interaction_id` whose text is `scenario:photo <n>` gets a
    call to `make_image(seed=n)` (interaction `int-<n>-1`); a request continuing
    `int-<n>-1` gets `saw picture <n>` when its function result holds picture n (else
    `wrong picture`), after `hold_s` seconds (interaction `int-<n>-2`)."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.hold_s = hold_s

    def __call__(self, request: RecordedRequest) -> StubReply:
        """Answer one interactions request."""
        body = request.json
        previous = body.get("previous_interaction_id")
        if previous is None:
            texts = [
                item["text"]
                for step in body["input"]
                if step["type"] == "user_input"
                for item in step["content"]
                if item["type"] == "text"
            ]
            seed = int(texts[-1].split()[-1])
            step = {"type": "function_call", "id": "fc-1", "name": "make_image"}
            return StubReply(
                {
                    "id": f"int-{seed}-1",
                    "status": "requires_action",
                    "steps": [{**step, "arguments": {"seed": seed}}],
                }
            )
        seed = int(previous.split("-")[1])
        (result,) = [s for s in body["input"] if s["type"] == "function_result"]
        images = [i for i in result["result"] if i.get("type") == "image"]
        seen = len(images) == 1 and wire_bytes(images[0]["data"]) == image_bytes(seed)
        time.sleep(self.hold_s)
        text = f"saw picture {seed}" if seen else "wrong picture"
        return StubReply(
            {
                "id": f"int-{seed}-2",
                "status": "completed",
                "steps": [{"type": "model_output", "content": [{"type": "text", "text": text}]}],
            }
        )
