"""What the engine emits: outputs, dead letters, approval requests and run events.

Records arrive typed and are serialised here, once, as they are emitted, every text passing
the job's `Redactor` (its secret values, then secret shapes). Outputs go to
the operator's main output; the other records go to side outputs, paired with the tag the
binding gave (`SideOutputs`: PyFlink `OutputTag`s in a job, plain names in tests). Run
events go to the subtask's event-log writer when it has one (no side output, no JSON),
else to the events side output as JSON text, and to the live telemetry, which builds
their spans, when it is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from streamagents.operators.agent import RunState
from streamagents.operators.agent.emitted_records import ApprovalRequest, DeadLetter, OutputRecord
from streamagents.operators.engine.metrics import EngineMetrics
from streamagents.operators.telemetry.live import LiveTelemetry
from streamagents.serde.events import RunEvent
from streamagents.serde.safe_text import redact_secrets

__all__ = ["Emitter", "EventWriter", "SideOutputs"]


@dataclass(frozen=True)
class SideOutputs:
    """The tags the engine pairs its side-output records with."""

    events: Any
    dead_letters: Any
    approval_requests: Any


class EventWriter(Protocol):
    """Writes run events to the subtask's event log."""

    def write_events(self, events: Sequence[RunEvent]) -> None: ...


class Emitter:
    """Turns the engine's records into emitted elements, and counts them; `redact` is what
    every record and event JSON passes (the job's `Redactor`; the event log writer and the
    live telemetry are given the same one where they are built)."""

    def __init__(
        self,
        tags: SideOutputs,
        metrics: EngineMetrics,
        event_log: EventWriter | None,
        event_log_level: str,
        telemetry: LiveTelemetry | None,
        job_id: str,
        redact: Callable[[str], str] = redact_secrets,
    ) -> None:
        self._tags = tags
        self._metrics = metrics
        self._event_log = event_log
        self._events_off = event_log_level == "off"  # made for telemetry only
        self._telemetry = telemetry
        self._job_id = job_id
        self._redact = redact

    def events(
        self, events: list[RunEvent], traced: bool = True, run_ended: bool = False
    ) -> Iterator[Any]:
        """Write a step's events to the event log (or the events output), and hand them to
        the live telemetry when `traced`."""
        if self._event_log is not None:
            if events:
                self._event_log.write_events(events)
        elif not self._events_off:
            tag = self._tags.events
            for event in events:
                yield tag, self._redact(event.json())
        if traced and self._telemetry is not None:
            self._telemetry.events(events, run_ended=run_ended)
            self._metrics.spans_exported.set(self._telemetry.exported)
            self._metrics.spans_dropped.set(self._telemetry.dropped)

    def output(self, output: OutputRecord) -> str:
        """A run's output record as a main-output element."""
        return output.to_json(self._redact)

    def dead_letter(self, letter: DeadLetter) -> tuple[Any, str]:
        """A dead-letter record as a side-output element."""
        self._metrics.dead_letters.inc()
        return self._tags.dead_letters, letter.to_json(self._redact)

    def approval_request(self, request: ApprovalRequest) -> tuple[Any, str]:
        """An approval request record as a side-output element."""
        return self._tags.approval_requests, request.to_json(self._redact)

    def resume_trace(self, state: RunState) -> None:
        """A run restored from a checkpoint goes on: its span goes on from its state."""
        if self._telemetry is not None:
            self._telemetry.spans.resume(
                state.run_id,
                self._job_id,
                state.key,
                state.started_ms,
                state.input_id,
                (state.input_tokens, state.output_tokens),
                state.messages,
            )

    def end_trace(self, run_id: str) -> None:
        """A run was abandoned: its span ends."""
        if self._telemetry is not None:
            self._telemetry.end(run_id)
