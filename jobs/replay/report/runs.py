"""The runs of an event log as outcomes to compare: one per input, found by (key, input id).

`load_runs` reads event-log files (finished ones; a folder is searched recursively) and
reduces each run to what a comparison needs: the answer's text, its status and error kind,
the tool calls with their parsed arguments in order, tokens, cost, latency from the input
to the output, and the media the run saw (the input's and those tools returned). Runs
without an input id (none of their events names one) cannot be paired and are left out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from streamagents.connectors.eventlog import DamagedFile, read_events
from streamagents.operators.telemetry.log_runs import runs_in_order
from streamagents.serde.event_payloads import (
    BudgetExceededPayload,
    ChatResponsePayload,
    ErrorPayload,
    FollowupFiredPayload,
    InputPayload,
    OutputPayload,
    ToolRequestPayload,
    ToolResponsePayload,
)
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import ChatMessage, MediaPart, ToolCall

__all__ = ["RunKey", "RunOutcome", "RunSet", "load_runs", "outcome_of"]

RunKey = tuple[str, str]
"""A run's place in a comparison: its key and its input id."""

_WITH_INPUT = (
    InputPayload | OutputPayload | ErrorPayload | BudgetExceededPayload | FollowupFiredPayload
)
_FAILED = ErrorPayload | BudgetExceededPayload


@dataclass(frozen=True)
class RunOutcome:
    """What one run did, as the comparison sees it."""

    key: str
    input_id: str
    run_id: str
    status: str
    """ok, error, or incomplete (the log has no output event for the run)."""
    error_kind: str | None
    """The error's class when the run failed (BadRequest, BudgetExceeded, ...)."""
    error_message: str | None
    text: str
    """The answer's text (empty when the run failed)."""
    tool_calls: tuple[ToolCall, ...]
    """The tool calls it made, in order (arguments as parsed JSON)."""
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """What its model calls cost; None when no call of the run was priced."""
    latency_ms: float
    """From its first event (the input) to its output event (its last event, if none)."""
    input_text: str = ""
    input_media: tuple[MediaPart, ...] = ()
    """Media of the input message (both sides of a comparison saw these)."""
    tool_media: tuple[MediaPart, ...] = ()
    """Media the run's tools returned."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens of all its model calls."""
        return self.input_tokens + self.output_tokens


@dataclass
class RunSet:
    """The runs of one side by (key, input id), and what reading them found amiss."""

    runs: dict[RunKey, RunOutcome] = field(default_factory=dict)
    damaged: list[DamagedFile] = field(default_factory=list)
    """Files read only up to damage (their remaining events were skipped)."""
    repeated: int = 0
    """Runs of an input already seen (the later run is the one kept)."""
    unpaired: int = 0
    """Runs no event of which names an input id."""


def _media(messages: Iterable[ChatMessage]) -> list[MediaPart]:
    """The media parts of `messages`, in order."""
    return [part for message in messages for part in message.media]


def _text(messages: Sequence[ChatMessage]) -> str:
    """The text of `messages`, one line each."""
    return "\n".join(message.content for message in messages if message.content)


def outcome_of(run_id: str, events: Sequence[AgentEvent]) -> RunOutcome | None:
    """The outcome of one run's events (in order); None when no event names its input."""
    payloads = [event.payload for event in events]
    found = (p.input_id for p in payloads if isinstance(p, _WITH_INPUT))
    input_id = next((i for i in found if i is not None), None)
    if input_id is None:
        return None
    outputs = [p for p in payloads if isinstance(p, OutputPayload)]
    output = outputs[-1] if outputs else None
    failures = [p for p in payloads if isinstance(p, _FAILED)]
    failure = failures[-1] if failures else None
    status = "incomplete" if output is None else (output.status or "ok")
    replies = [p for p in payloads if isinstance(p, ChatResponsePayload)]
    usages = [p.usage for p in replies if p.usage is not None]
    costs = [p.cost_usd for p in replies if p.cost_usd is not None]
    cost = output.cost_usd if output is not None and output.cost_usd is not None else None
    inputs = [p for p in payloads if isinstance(p, InputPayload)]
    results = [m for p in payloads if isinstance(p, ToolResponsePayload) for m in p.tool_results]
    failed = failure if status != "ok" else None
    ended = [e.timestamp_ms for e in events if isinstance(e.payload, OutputPayload)]
    ended_ms = ended[-1] if ended else events[-1].timestamp_ms
    return RunOutcome(
        key=events[0].key or "",
        input_id=input_id,
        run_id=run_id,
        status=status,
        error_kind=failed.error_class if failed is not None else None,
        error_message=failed.error_message if failed is not None else None,
        text=_text(output.messages) if output is not None and status == "ok" else "",
        tool_calls=tuple(
            call for p in payloads if isinstance(p, ToolRequestPayload) for call in p.tool_calls
        ),
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cost_usd=sum(costs) if costs else cost,
        latency_ms=float(ended_ms - events[0].timestamp_ms),
        input_text=_text([m for p in inputs for m in p.messages]),
        input_media=tuple(_media(m for p in inputs for m in p.messages)),
        tool_media=tuple(_media(results)),
    )


def load_runs(paths: Iterable[str | os.PathLike[str]]) -> RunSet:
    """The runs in the event logs at `paths` (files or folders), by (key, input id).

    An input run twice (a rerun of the same input) keeps its later run; a damaged file
    gives the events before its damage and is listed in `damaged`. A path that names
    nothing is a FileNotFoundError."""
    found = RunSet()
    events: list[AgentEvent] = []
    for path in paths:
        events.extend(read_events(path, typed=True, damaged=found.damaged))
    for run_id, ordered in runs_in_order(events):
        outcome = outcome_of(run_id, ordered)
        if outcome is None:
            found.unpaired += 1
            continue
        place = (outcome.key, outcome.input_id)
        found.repeated += place in found.runs
        found.runs[place] = outcome
    return found
