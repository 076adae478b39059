"""Event-log records of a run, with ids derived from (run_id, sequence) so replays agree."""

from __future__ import annotations

from streamagents.serde.event_payloads import EventPayload
from streamagents.serde.events import RunEvent

__all__ = ["event_id_for", "make_event"]


def event_id_for(run_id: str, sequence: int) -> str:
    """The id of a run's `sequence`-th event: the same after a restore re-issues the step."""
    return f"{run_id}.{sequence:04d}"


def make_event(
    payload: EventPayload,
    *,
    job_id: str,
    key: str,
    run_id: str,
    sequence: int,
    timestamp_ms: int,
    upstream_event_id: str | None,
) -> RunEvent:
    """One event-log record of a run carrying `payload`, with its deterministic id."""
    return RunEvent(
        payload,
        event_id=event_id_for(run_id, sequence),
        job_id=job_id,
        key=key,
        run_id=run_id,
        sequence=sequence,
        timestamp_ms=timestamp_ms,
        upstream_event_id=upstream_event_id,
    )
