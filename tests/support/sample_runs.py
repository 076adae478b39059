"""A small event log of two agent runs, shaped as the runtime writes them, with real images.

Run `alice` sees a user image, calls the `camera` tool (which returns another image) and
answers; run `bob` gets hostile text (a `<script>`, a key-shaped secret), its tool fails and
the tool-call budget stops it. The images are real, decodable PNGs in a media store, so a
browser can show them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.connectors.media import MediaStore
from streamagents.jobs.examples.sample_data import png
from streamagents.serde.chat import RetryAttempt, TokenUsage
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart, ToolCall

SECRET = "sk-live0123456789abcdefghijklmnop"
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
T0 = 1_790_000_000_000


@dataclass(frozen=True)
class SampleLog:
    """Where the sample was written and what it holds."""

    log_dir: Path
    media_root: Path
    user_image: MediaRef
    tool_image: MediaRef
    events: list[AgentEvent]


class _Run:
    def __init__(self, key: str, start_ms: int) -> None:
        self.key = key
        self.run_id = f"run-{key}"
        self.now = start_ms
        self.sequence = 0
        self.events: list[AgentEvent] = []

    def emit(self, kind: str, upstream: str | None = None, after_ms: int = 5, **payload) -> str:
        self.sequence += 1
        self.now += after_ms
        event = new_event(
            kind,
            job_id="sample-job",
            key=self.key,
            run_id=self.run_id,
            sequence=self.sequence,
            upstream_event_id=upstream,
            timestamp_ms=self.now,
            event_id=f"{self.run_id}.{self.sequence:04d}",
            **payload,
        )
        self.events.append(event)
        return event.event_id


def _chat(
    run: _Run, upstream: str, answer: ChatMessage, usage: tuple[int, ...], finish: str
) -> str:
    request = run.emit(
        "chat_request",
        upstream=upstream,
        model="gemini-2.5-flash",
        attributes={"provider": "gemini", "tools": "camera,lookup"},
    )
    return run.emit(
        "chat_response",
        upstream=request,
        after_ms=400,
        messages=[answer],
        usage=TokenUsage(
            input_tokens=usage[0], output_tokens=usage[1], cached_tokens=sum(usage[2:])
        ),
        model="gemini-2.5-flash-001",
        latency_ms=395.0,
        finish_reason=finish,
        cost_usd=0.0012,
        interaction_id=f"{request}-interaction",
    )


def _tool(run: _Run, upstream: str, call: ToolCall, result: ChatMessage) -> str:
    request = run.emit("tool_request", upstream=upstream, tool_calls=[call])
    return run.emit(
        "tool_response", upstream=request, after_ms=50, tool_results=[result], latency_ms=45.0
    )


def write_sample_log(folder: Path) -> SampleLog:
    """Write the two runs' event log under `folder/log` and their images under `folder/media`."""
    store = MediaStore(str(folder / "media"))
    user_image = store.put(png(64, 48, (200, 40, 40), []), "image/png")
    tool_image = store.put(png(32, 32, (40, 40, 200), []), "image/png")

    alice = _Run("alice", T0)
    question = ChatMessage(
        role="user",
        parts=[
            TextPart(text="What is in this picture?"),
            ImagePart(mime_type="image/png", ref=user_image),
        ],
    )
    last = alice.emit("input", messages=[question], attributes={"input_id": "in-1"})
    snap = ToolCall(id="call-1", name="camera", arguments={"name": "north"})
    last = _chat(
        alice, last, ChatMessage(role="assistant", tool_calls=[snap]), (120, 15), "tool_calls"
    )
    picture = ChatMessage(
        role="tool",
        tool_call_id="call-1",
        name="camera",
        parts=[
            TextPart(text="picture from north"),
            ImagePart(mime_type="image/png", ref=tool_image),
        ],
    )
    last = _tool(alice, last, snap, picture)
    answer = ChatMessage(
        role="assistant", content="A red square; the north camera shows a blue one."
    )
    _chat(alice, last, answer, (300, 20, 256), "STOP")  # 256 input tokens from the cache
    alice.emit("output", messages=[answer], attributes={"input_id": "in-1", "status": "ok"})

    bob = _Run("bob", T0 + 10_000)
    last = bob.emit(
        "input",
        messages=[ChatMessage.user(f"{HOSTILE} my api_key={SECRET}")],
        attributes={"input_id": "in-2"},
    )
    look = ToolCall(id="call-2", name="lookup", arguments={"q": HOSTILE})
    last = _chat(bob, last, ChatMessage(role="assistant", tool_calls=[look]), (80, 9), "tool_calls")
    failed = ChatMessage.tool_result("call-2", "lookup", f"failed: {HOSTILE}", is_error=True)
    _tool(bob, last, look, failed)
    bob.emit(
        "budget_exceeded",
        error_class="BudgetExceeded",
        error_message="max_tool_calls=1: the model asked for 1 more, 2 in all",
        attributes={"input_id": "in-2", "budget": "max_tool_calls", "limit": "1"},
    )
    bob.emit("output", attributes={"input_id": "in-2", "status": "error"})

    events = alice.events + bob.events
    with EventLogWriter(folder / "log", level="verbose") as writer:
        writer.write_all(events)
    return SampleLog(folder / "log", folder / "media", user_image, tool_image, events)


def write_retry_and_approval_log(folder: Path) -> None:
    """Write, under `folder`, the log of run `carol`: its model call succeeds on the third
    attempt (after a 429 and a 503) and asks for `refund`, which a person (`ana`) approves."""
    carol = _Run("carol", T0 + 20_000)
    last = carol.emit("input", messages=[ChatMessage.user("refund A1")])
    request = carol.emit("chat_request", upstream=last, model="gpt-test")
    sent = carol.now
    retries = [
        RetryAttempt(
            attempt=1, ended_ms=sent + 100, error_type="RateLimited", status=429, backoff_ms=400
        ),
        RetryAttempt(
            attempt=2, ended_ms=sent + 600, error_type="ServerError", status=503, backoff_ms=900
        ),
    ]
    refund = ToolCall(id="call-9", name="refund", arguments={"order": "A1"})
    last = carol.emit(
        "chat_response",
        upstream=request,
        after_ms=2_000,
        messages=[ChatMessage(role="assistant", tool_calls=[refund])],
        model="gpt-test",
        latency_ms=1_990.0,
        attempts=3,
        retries=retries,
    )
    call = carol.emit("tool_request", upstream=last, tool_calls=[refund])
    facts = {"call_id": call, "deadline_ms": str(carol.now + 60_000)}
    carol.emit("approval_requested", upstream=call, tool_calls=[refund], attributes=facts)
    decided = {"call_id": call, "decision": "approve", "by": "ana", "comment": "ok"}
    carol.emit(
        "approval_decided",
        upstream=call,
        after_ms=30_000,
        tool_calls=[refund],
        attributes={**decided, "edited_arguments": "false"},
    )
    done = ChatMessage.tool_result("call-9", "refund", "refunded")
    carol.emit("tool_response", upstream=call, tool_results=[done], latency_ms=3.0)
    carol.emit("output", attributes={"status": "ok"})
    with EventLogWriter(folder, level="verbose") as writer:
        writer.write_all(carol.events)
