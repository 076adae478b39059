"""Event-log records of a run, with ids derived from (run_id, sequence) so replays agree."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

__all__ = ["event_id_for", "make_event"]


def event_id_for(run_id: str, sequence: int) -> str:
    """The id of a run's `sequence`-th event: the same after a restore re-issues the step."""
    return f"{run_id}.{sequence:04d}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def make_event(
    event_type: str,
    *,
    event_id: str,
    job_id: str,
    key: str,
    run_id: str,
    sequence: int,
    timestamp_ms: int,
    upstream_event_id: str | None,
    **payload: Any,
) -> str:
    """One event-log record as JSON."""
    record = {
        "event_id": event_id,
        "event_type": event_type,
        "job_id": job_id,
        "key": key,
        "run_id": run_id,
        "sequence": sequence,
        "timestamp_ms": timestamp_ms,
        "upstream_event_id": upstream_event_id,
        **{name: _jsonable(value) for name, value in payload.items()},
    }
    return json.dumps(record, ensure_ascii=False)
