"""The runs in an event log: its events grouped by run id, each step once, in order."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from streamagents.serde.events import AgentEvent

__all__ = ["runs_in_order"]


def runs_in_order(events: Iterable[AgentEvent]) -> list[tuple[str, list[AgentEvent]]]:
    """Each run's id and events, runs by start time, events by sequence.

    An event seen twice (a step the job re-emitted after a restore has the same id) counts
    once; events without a run id are left out."""
    by_run: dict[str, dict[str, AgentEvent]] = defaultdict(dict)
    for event in events:
        if event.run_id is not None:
            by_run[event.run_id].setdefault(event.event_id, event)
    runs = [
        (run_id, sorted(unique.values(), key=lambda e: (e.sequence, e.timestamp_ms, e.event_id)))
        for run_id, unique in by_run.items()
    ]
    return sorted(runs, key=lambda run: (min(e.timestamp_ms for e in run[1]), run[0]))
