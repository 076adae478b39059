"""Event-log records of a run, with ids derived from (run_id, sequence) so replays agree."""

from __future__ import annotations

from typing import Any

from streamagents.serde.events import EventText, new_event

__all__ = ["event_id_for", "make_event"]


def event_id_for(run_id: str, sequence: int) -> str:
    """The id of a run's `sequence`-th event: the same after a restore re-issues the step."""
    return f"{run_id}.{sequence:04d}"


def make_event(
    event_type: str,
    *,
    job_id: str,
    key: str,
    run_id: str,
    sequence: int,
    timestamp_ms: int,
    upstream_event_id: str | None,
    **payload: Any,
) -> EventText:
    """One event-log record: the JSON form of an `AgentEvent` with its deterministic id
    (carrying the model, for a writer in the same process)."""
    event = new_event(
        event_type,
        event_id=event_id_for(run_id, sequence),
        job_id=job_id,
        key=key,
        run_id=run_id,
        sequence=sequence,
        timestamp_ms=timestamp_ms,
        upstream_event_id=upstream_event_id,
        **payload,
    )
    return EventText.of(event)
