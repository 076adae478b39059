"""Spans of agent runs, built from event log events under the OpenTelemetry GenAI conventions.

`spans_from_events` turns the events of each run into one `invoke_agent {agent}` span, a
`chat {model}` span per model call (its retried attempts as `retry` span events), an
`execute_tool {tool}` span per tool call and an `await_approval {tool}` span per approval
asked for, as plain `SpanRecord`s (no OpenTelemetry import needed here). `LiveSpans`
builds the same spans while a job runs, from the same events as they are emitted: a step's
span when it ends, the run's span when the run ends. Trace and span ids are derived from the
run id and the event ids, so the same log always gives the same ids, and a step re-emitted
after a restore (same event id) gives the same span. Message content is kept only when asked,
with media as store URI references (events never hold media bytes); every string is passed
through `redact_secrets` and, where a span is built, through the job's `Redactor` (its own
secret values too), and provider metadata (e.g. thought signatures) is never exported.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from streamagents.connectors.mcp_servers import split_mcp_tool_name
from streamagents.connectors.providers import provider_family
from streamagents.operators.telemetry.log_runs import runs_in_order
from streamagents.serde.event_payloads import (
    ApprovalDecidedPayload,
    ApprovalExpiredPayload,
    ApprovalRequestedPayload,
    BudgetExceededPayload,
    ChatRequestPayload,
    ChatResponsePayload,
    ErrorPayload,
    FollowupFiredPayload,
    InputPayload,
    OutputPayload,
    ToolRequestPayload,
    ToolResponsePayload,
)
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import ChatMessage, TextPart
from streamagents.serde.safe_text import redact_secrets

__all__ = [
    "AttributeValue",
    "LiveSpans",
    "SpanEvent",
    "SpanRecord",
    "span_id_for",
    "spans_from_events",
    "trace_id_for",
]

AttributeValue = str | int | float | bool | tuple[str, ...]

_GEN_AI_PROVIDERS = {"gemini": "gcp.gemini", "openai": "openai"}
"""`gen_ai.provider.name` of each provider family (the conventions' well-known values)."""


def _gen_ai_provider(provider: str) -> str:
    """The `gen_ai.provider.name` of a configured provider; an unknown one as it is named."""
    return _GEN_AI_PROVIDERS.get(provider_family(provider) or "", provider)


@dataclass(frozen=True)
class SpanEvent:
    """Something that happened at one time within a span (a retried attempt)."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue]


@dataclass(frozen=True)
class SpanRecord:
    """One finished span: its ids, name, kind, times (ns since the epoch) and attributes."""

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    kind: Literal["internal", "client"]
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    error: str | None = None
    """The status description when the span failed; None for a span that did not."""
    job_id: str = ""
    events: tuple[SpanEvent, ...] = ()
    """Its span events, in time order, each within the span's times."""


def _hashed_id(label: str, text: str, size: int) -> int:
    digest = hashlib.sha256(f"{label}\n{text}".encode()).digest()
    return int.from_bytes(digest[:size], "big") or 1  # zero is the invalid id


def trace_id_for(run_id: str) -> int:
    """The 128-bit trace id of a run: the same for every span of the run, restores included."""
    return _hashed_id("trace", run_id, 16)


def span_id_for(event_or_run_id: str) -> int:
    """The 64-bit span id of a run (its run id) or of a step (the event id that opened it)."""
    return _hashed_id("span", event_or_run_id, 8)


def _ns(ms: float) -> int:
    return int(ms * 1_000_000)


def _clean(text: str) -> str:
    return redact_secrets(text)


def _part_json(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": _clean(part.text)}
    entry: dict[str, Any] = {"type": "uri", "modality": part.kind, "mime_type": part.mime_type}
    if part.ref is not None:
        entry["uri"] = part.ref.uri or f"sha256:{part.ref.sha256}"
        entry["size_bytes"] = part.ref.size_bytes
    elif part.url is not None:
        entry["uri"] = _clean(part.url)
    else:  # cannot happen for logged events (they refuse inline media); never send bytes
        entry["uri"] = None
    return entry


def message_json(message: ChatMessage, finish_reason: str | None = None) -> dict[str, Any]:
    """A message in the GenAI conventions' JSON form, media as URI references."""
    parts: list[dict[str, Any]]
    if message.role == "tool":
        parts = [
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": _clean(message.content),
            }
        ]
        parts += [_part_json(p) for p in message.parts if not isinstance(p, TextPart)]
    elif message.parts:
        parts = [_part_json(p) for p in message.parts]
    else:
        parts = [{"type": "text", "content": _clean(message.content)}] if message.content else []
    parts += [
        {
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": json.loads(_clean(json.dumps(call.arguments))),
        }
        for call in message.tool_calls
    ]
    entry: dict[str, Any] = {"role": message.role, "parts": parts}
    if finish_reason is not None:
        entry["finish_reason"] = finish_reason
    return entry


def _messages_attr(messages: Sequence[ChatMessage], finish_reason: str | None = None) -> str:
    return json.dumps([message_json(m, finish_reason) for m in messages], ensure_ascii=False)


@dataclass
class _Step:
    """A model or tool call being assembled from its request and response events."""

    span_id: int
    start_ms: float
    name: str
    kind: Literal["internal", "client"]
    attributes: dict[str, AttributeValue]
    end_ms: float | None = None
    error: str | None = None
    events: list[SpanEvent] = field(default_factory=list)


@dataclass
class _RunSpans:
    """What is known of one run while its events are read in order."""

    run_id: str
    job_id: str
    start_ms: float
    end_ms: float
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str | None = None
    steps: dict[str, _Step] = field(default_factory=dict)
    conversation: list[ChatMessage] = field(default_factory=list)
    usage: list[int] = field(default_factory=lambda: [0, 0])
    redact: Callable[[str], str] = redact_secrets
    """What every text of its spans passes as they are built (the job's `Redactor`)."""

    @classmethod
    def of(
        cls,
        run_id: str,
        job_id: str,
        key: str | None,
        start_ms: float,
        redact: Callable[[str], str] = redact_secrets,
    ) -> _RunSpans:
        """A run of `job_id` on `key` that started at `start_ms`, its texts passing `redact`."""
        run = cls(run_id, job_id, start_ms, start_ms, redact=redact)
        if key is not None:
            run.attributes["gen_ai.conversation.id"] = key
            run.attributes["streamagents.key"] = key
        return run

    def add(self, event: AgentEvent, capture: bool) -> None:
        """Take the next event of the run into account."""
        self.start_ms = min(self.start_ms, event.timestamp_ms)
        self.end_ms = max(self.end_ms, event.timestamp_ms)
        _HANDLERS.get(event.payload.kind, _run_event)(self, event, capture)

    def step_span(self, step: _Step) -> SpanRecord:
        """The span of one step (marked incomplete when its response never came)."""
        end = step.end_ms if step.end_ms is not None else step.start_ms
        if step.end_ms is None:
            step.attributes["streamagents.incomplete"] = True
        self.start_ms = min(self.start_ms, step.start_ms)  # a response logged without request
        self.end_ms = max(self.end_ms, end)
        start_ns, end_ns = _ns(step.start_ms), _ns(end)
        events = tuple(
            SpanEvent(e.name, min(max(e.time_ns, start_ns), end_ns), self._cleaned(e.attributes))
            for e in step.events
        )
        return SpanRecord(
            trace_id_for(self.run_id),
            step.span_id,
            span_id_for(self.run_id),
            step.name,
            step.kind,
            start_ns,
            end_ns,
            self._cleaned(step.attributes),
            self._cleaned_error(step.error),
            self.job_id,
            events,
        )

    def finished_steps(self) -> list[SpanRecord]:
        """The spans of the steps that have ended, which then leave the run."""
        done = [key for key, step in self.steps.items() if step.end_ms is not None]
        return [self.step_span(self.steps.pop(key)) for key in done]

    def root_span(self) -> SpanRecord:
        """The `invoke_agent` span of the run, over all its steps."""
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.job_id,
            "streamagents.run_id": self.run_id,
            **self.attributes,
            "gen_ai.usage.input_tokens": self.usage[0],
            "gen_ai.usage.output_tokens": self.usage[1],
        }
        return SpanRecord(
            trace_id_for(self.run_id),
            span_id_for(self.run_id),
            None,
            f"invoke_agent {self.job_id}",
            "internal",
            _ns(self.start_ms),
            _ns(self.end_ms),
            self._cleaned(attributes),
            self._cleaned_error(self.error),
            self.job_id,
        )

    def spans(self) -> list[SpanRecord]:
        """The run span, then the span of each step still held, in the order they began."""
        steps = [self.step_span(step) for step in self.steps.values()]
        return [self.root_span(), *steps]

    def _cleaned(self, attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        return {k: self.redact(v) if isinstance(v, str) else v for k, v in attributes.items()}

    def _cleaned_error(self, error: str | None) -> str | None:
        return None if error is None else self.redact(error)


def _step_key(run: _RunSpans, event: AgentEvent) -> str:
    """Where a response without a known request keeps its step: under the request it
    answers (its upstream event, when of the same run: ids are `{run_id}.{sequence}`), so
    its span gets the id its request would give it, and a call performed again after a
    restore, whose request was emitted before, keeps its id."""
    upstream = event.upstream_event_id
    same_run = upstream is not None and upstream.startswith(f"{run.run_id}.")
    if same_run and upstream not in run.steps:
        return upstream
    return event.event_id


def _chat_request(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    assert isinstance(payload, ChatRequestPayload)
    provider = payload.provider
    attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
    if provider:
        attributes["gen_ai.provider.name"] = _gen_ai_provider(provider)
        run.attributes.setdefault("gen_ai.provider.name", attributes["gen_ai.provider.name"])
    if payload.model:
        attributes["gen_ai.request.model"] = payload.model
    if capture:
        attributes["gen_ai.input.messages"] = _messages_attr(run.conversation)
    name = f"chat {payload.model}" if payload.model else "chat"
    run.steps[event.event_id] = _Step(
        span_id_for(event.event_id), event.timestamp_ms, name, "client", attributes
    )


def _chat_response(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    assert isinstance(payload, ChatResponsePayload)
    latency = payload.latency_ms or 0.0
    step = run.steps.get(event.upstream_event_id or "")
    if step is None:  # no request seen (an older log, a restore): the response makes the span
        key = _step_key(run, event)
        step = _Step(
            span_id_for(key),
            event.timestamp_ms - latency,
            f"chat {payload.model}" if payload.model else "chat",
            "client",
            {"gen_ai.operation.name": "chat"},
        )
        if capture and run.conversation:
            step.attributes["gen_ai.input.messages"] = _messages_attr(run.conversation)
        run.steps[key] = step
    step.end_ms = max(float(event.timestamp_ms), step.start_ms + latency)
    attributes = step.attributes
    if payload.model:
        attributes["gen_ai.response.model"] = payload.model
        attributes.setdefault("gen_ai.request.model", payload.model)
    if payload.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = (payload.finish_reason,)
    if payload.usage is not None:
        attributes["gen_ai.usage.input_tokens"] = payload.usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = payload.usage.output_tokens
        if payload.usage.cached_tokens:
            cached = payload.usage.cached_tokens
            attributes["gen_ai.usage.cache_read.input_tokens"] = cached
        run.usage[0] += payload.usage.input_tokens
        run.usage[1] += payload.usage.output_tokens
    if payload.attempts is not None:
        attributes["streamagents.attempts"] = payload.attempts
    if payload.answered_provider:  # which model of a failover chain answered
        attributes["gen_ai.provider.name"] = _gen_ai_provider(payload.answered_provider)
        attributes["streamagents.model.provider"] = payload.answered_provider
    if payload.fallback is not None:
        attributes["streamagents.model.fallback"] = payload.fallback
    if payload.passed_over:
        attributes["streamagents.model.passed_over"] = tuple(payload.passed_over)
    if payload.cost_usd is not None:
        attributes["streamagents.cost_usd"] = payload.cost_usd
    step.events = [
        SpanEvent(
            "retry",
            _ns(retry.ended_ms),
            {
                "streamagents.retry.attempt": retry.attempt,
                "error.type": retry.error_type,
                **({} if retry.status is None else {"http.response.status_code": retry.status}),
                "streamagents.retry.backoff_ms": retry.backoff_ms,
            },
        )
        for retry in payload.retries
    ]
    if payload.interaction_id:  # the provider's stored response (Gemini interactions)
        attributes["gen_ai.response.id"] = payload.interaction_id
    if payload.error_class:
        attributes["error.type"] = payload.error_class
        step.error = _clean(payload.error_message or payload.error_class)
    if capture and payload.messages:
        attributes["gen_ai.output.messages"] = _messages_attr(
            payload.messages, payload.finish_reason
        )
    run.conversation.extend(payload.messages)


def _mcp_attributes(
    payload: ToolRequestPayload | ToolResponsePayload, tool_name: str
) -> dict[str, AttributeValue]:
    """`mcp.server` and `mcp.tool` of an MCP tool's call, as its event records them (or,
    in a log written before events did, as its name `mcp__<server>__<tool>` says); else
    nothing."""
    if payload.mcp_server is not None:
        return {"mcp.server": payload.mcp_server, "mcp.tool": payload.mcp_tool or tool_name}
    split = split_mcp_tool_name(tool_name)
    return {} if split is None else {"mcp.server": split[0], "mcp.tool": split[1]}


def _tool_request(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    assert isinstance(payload, ToolRequestPayload)
    for call in payload.tool_calls:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            **_mcp_attributes(payload, call.name),
        }
        if capture:
            attributes["gen_ai.tool.call.arguments"] = _clean(
                json.dumps(call.arguments, ensure_ascii=False)
            )
        single = len(payload.tool_calls) == 1
        key = event.event_id if single else f"{event.event_id}#{call.id}"
        name = f"execute_tool {call.name}"
        run.steps[key] = _Step(span_id_for(key), event.timestamp_ms, name, "internal", attributes)


def _tool_response(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    assert isinstance(payload, ToolResponsePayload)
    latency = payload.latency_ms or 0.0
    for result in payload.tool_results:
        step = run.steps.get(event.upstream_event_id or "")
        if step is None or step.end_ms is not None:
            key = f"{event.upstream_event_id}#{result.tool_call_id}"
            step = run.steps.get(key)
        if step is None:
            key = _step_key(run, event)
            if key in run.steps:
                key = f"{event.event_id}#{result.tool_call_id}"
            step = _Step(
                span_id_for(key),
                event.timestamp_ms - latency,
                f"execute_tool {result.name}",
                "internal",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": result.name or "",
                    "gen_ai.tool.call.id": result.tool_call_id or "",
                    **_mcp_attributes(payload, result.name or ""),
                },
            )
            run.steps[key] = step
        step.end_ms = max(float(event.timestamp_ms), step.start_ms + latency)
        if result.is_error:
            step.attributes["error.type"] = "ToolError"
            step.error = "the tool reported an error"
        step.attributes["streamagents.tool.is_error"] = result.is_error
        if capture:
            step.attributes["gen_ai.tool.call.result"] = _clean(result.content)
        run.conversation.append(result)


_ApprovalPayload = ApprovalRequestedPayload | ApprovalDecidedPayload | ApprovalExpiredPayload


def _approval_step(run: _RunSpans, payload: _ApprovalPayload, event: AgentEvent) -> _Step | None:
    """The wait for a person's decision on one tool call, opened by the first of its events
    seen (its request, or its end when the request came before a restore). Its id comes
    from the call it is about, which every approval event names, so it is the same either
    way."""
    call_id = payload.call_id
    if call_id is None:
        return None
    key = f"{call_id}#approval@{run.run_id}"  # call ids hold the run id, but a log may lie
    step = run.steps.get(key)
    if step is None:
        calls = payload.tool_calls
        tool = calls[0].name if calls else ""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.tool.name": tool,
            "streamagents.approval.call_id": call_id,
        }
        if calls:
            attributes["gen_ai.tool.call.id"] = calls[0].id
        name = f"await_approval {tool}" if tool else "await_approval"
        step = _Step(span_id_for(key), event.timestamp_ms, name, "internal", attributes)
        run.steps[key] = step
    return step


def _approval_requested(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    assert isinstance(payload, ApprovalRequestedPayload)
    step = _approval_step(run, payload, event)
    deadline = payload.deadline_ms
    if step is not None and deadline is not None and deadline >= 0:
        step.attributes["streamagents.approval.deadline_ms"] = deadline


def _approval_ended(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    assert isinstance(payload, ApprovalDecidedPayload | ApprovalExpiredPayload)
    step = _approval_step(run, payload, event)
    if step is None:
        return
    step.end_ms = max(float(event.timestamp_ms), step.start_ms)
    timed_out = isinstance(payload, ApprovalExpiredPayload)
    step.attributes["streamagents.approval.timed_out"] = timed_out
    if isinstance(payload, ApprovalExpiredPayload):
        step.attributes["streamagents.approval.decision"] = "expired"
        return
    step.attributes["streamagents.approval.decision"] = payload.decision or ""
    if payload.edited_arguments is not None:
        step.attributes["streamagents.approval.edited_arguments"] = payload.edited_arguments
    if capture:  # who decided is a person's name, and the comment their words
        for name, said in (("by", payload.by), ("comment", payload.comment)):
            if said:
                step.attributes[f"streamagents.approval.{name}"] = said


_WITH_INPUT_ID = (
    InputPayload | OutputPayload | ErrorPayload | BudgetExceededPayload | FollowupFiredPayload
)
"""The payloads that name the run's input."""


def _run_event(run: _RunSpans, event: AgentEvent, capture: bool) -> None:
    payload = event.payload
    if isinstance(payload, _WITH_INPUT_ID) and payload.input_id is not None:
        run.attributes["streamagents.input_id"] = payload.input_id
    if isinstance(payload, InputPayload):
        run.conversation.extend(payload.messages)
        if capture:
            run.attributes["gen_ai.input.messages"] = _messages_attr(payload.messages)
    elif isinstance(payload, ErrorPayload | BudgetExceededPayload):
        kind = payload.kind
        run.attributes["error.type"] = payload.error_class or kind
        run.error = _clean(payload.error_message or payload.error_class or kind)
        if isinstance(payload, BudgetExceededPayload) and payload.budget is not None:
            run.attributes["streamagents.budget"] = payload.budget
    elif isinstance(payload, OutputPayload):
        run.attributes["streamagents.status"] = payload.status or ""
        if payload.cost_usd is not None:
            run.attributes["streamagents.cost_usd"] = payload.cost_usd
        if capture and payload.messages:
            run.attributes["gen_ai.output.messages"] = _messages_attr(payload.messages)


_HANDLERS = {
    "chat_request": _chat_request,
    "chat_response": _chat_response,
    "tool_request": _tool_request,
    "tool_response": _tool_response,
    "approval_requested": _approval_requested,
    "approval_decided": _approval_ended,
    "approval_expired": _approval_ended,
}


def spans_from_events(
    events: Iterable[AgentEvent], capture_content: bool = False
) -> list[SpanRecord]:
    """The spans of every run in `events` (any order; events re-emitted by a restore count once).

    Events without a run id (none are written today) are skipped. Runs come in the order they
    started, each root span first, then its steps in the order they were logged."""
    spans: list[SpanRecord] = []
    for run_id, ordered in runs_in_order(events):
        first = ordered[0]
        run = _RunSpans.of(run_id, first.job_id, first.key, first.timestamp_ms)
        for event in ordered:
            run.add(event, capture_content)
        spans.extend(run.spans())
    return spans


class LiveSpans:
    """The spans of the runs one operator subtask drives, built as their events are emitted.

    The same builder as `spans_from_events`, fed one step's events at a time: a chat or tool
    span is returned as soon as its response event arrives, the run's span (and any step
    left without a response) when the run ends. A run first seen after a restore starts
    from what `resume` tells of it; its spans keep the ids a log of the whole run gives.
    At most `max_runs` runs are held: past that the oldest is dropped, spans unsent. Every
    text of a span passes `redact` (the job's `Redactor`) as the span is built.
    """

    def __init__(
        self,
        capture_content: bool = False,
        max_runs: int = 100_000,
        redact: Callable[[str], str] = redact_secrets,
    ) -> None:
        self._capture = capture_content
        self._max_runs = max_runs
        self._redact = redact
        self._runs: dict[str, _RunSpans] = {}

    @property
    def open_runs(self) -> int:
        """Runs whose span has not been returned yet."""
        return len(self._runs)

    def resume(
        self,
        run_id: str,
        job_id: str,
        key: str,
        started_ms: int,
        input_id: str,
        tokens: tuple[int, int] = (0, 0),
        conversation: Sequence[ChatMessage] = (),
    ) -> None:
        """Open a run restored mid-way, from its restored state: when it started, its input
        id, the tokens it used and its conversation (media as refs) before the restore."""
        run = _RunSpans.of(run_id, job_id, key, started_ms, self._redact)
        run.attributes["streamagents.input_id"] = input_id
        run.usage = list(tokens)
        run.conversation = list(conversation)
        self._open(run)

    def add(self, events: Iterable[AgentEvent]) -> list[SpanRecord]:
        """Take a step's events; returns the spans of the steps they ended."""
        spans: list[SpanRecord] = []
        touched: dict[str, _RunSpans] = {}
        for event in events:
            if event.run_id is None:
                continue
            run = self._runs.get(event.run_id)
            if run is None:
                run = _RunSpans.of(
                    event.run_id, event.job_id, event.key, event.timestamp_ms, self._redact
                )
                self._open(run)
            run.add(event, self._capture)
            touched[event.run_id] = run
        for run in touched.values():
            spans.extend(run.finished_steps())
        return spans

    def end(self, run_id: str) -> list[SpanRecord]:
        """The run's span and those of its steps left open; the run is then forgotten."""
        run = self._runs.pop(run_id, None)
        return [] if run is None else run.spans()

    def _open(self, run: _RunSpans) -> None:
        self._runs.pop(run.run_id, None)
        self._runs[run.run_id] = run
        while len(self._runs) > self._max_runs:
            self._runs.pop(next(iter(self._runs)))
