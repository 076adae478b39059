"""`Emitter`: outputs on the main output, dead letters and approval requests on their side
outputs, run events to the event log when the subtask has one, else to the events output
as JSON (none at level `off`), and the dead letters counted."""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine_harness import TAGS, InMemoryMetricGroup

from streamagents.operators.agent._run_events import make_event
from streamagents.operators.agent.emitted_records import DeadLetter
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.engine.emitter import Emitter
from streamagents.operators.engine.metrics import EngineMetrics
from streamagents.serde.event_payloads import InputPayload
from streamagents.serde.events import RunEvent


class EventLog:
    """An event-log writer that keeps what it was given."""

    def __init__(self) -> None:
        self.written: list[RunEvent] = []

    def write_events(self, events: Sequence[RunEvent]) -> None:
        self.written.extend(events)


def event(sequence: int) -> RunEvent:
    return make_event(
        InputPayload(input_id="i"),
        job_id="job",
        key="k",
        run_id="run-1",
        sequence=sequence,
        timestamp_ms=1,
        upstream_event_id=None,
    )


def emitter(
    log: EventLog | None = None, level: str = "standard"
) -> tuple[Emitter, InMemoryMetricGroup]:
    group = InMemoryMetricGroup()
    return Emitter(TAGS, EngineMetrics(group), log, level, None, "job"), group


def test_events_go_to_the_events_output_as_json_without_an_event_log() -> None:
    emit, _ = emitter()
    emitted = list(emit.events([event(1), event(2)]))
    assert [tag for tag, _ in emitted] == [TAGS.events, TAGS.events]
    assert [json.loads(text)["event_id"] for _, text in emitted] == ["run-1.0001", "run-1.0002"]


def test_events_go_to_the_event_log_when_there_is_one_and_nowhere_at_level_off() -> None:
    log = EventLog()
    emit, _ = emitter(log)
    assert list(emit.events([event(1)])) == []
    assert [e.event_id for e in log.written] == ["run-1.0001"]
    quiet, _ = emitter(None, "off")
    assert list(quiet.events([event(1)])) == []


def test_dead_letters_go_to_their_side_output_and_are_counted() -> None:
    emit, group = emitter()
    letter = DeadLetter.build("parse", ErrorInfo(type="InvalidJson", message="no"), "x{")
    tag, text = emit.dead_letter(letter)
    assert tag == TAGS.dead_letters and json.loads(text)["error_type"] == "InvalidJson"
    assert group.counter("dead_letters").count == 1
