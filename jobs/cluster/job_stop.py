"""Stopping a running job through Flink's REST API: with a savepoint (`streamagents
savepoint`), and, for a job whose bounded input is held open (`build_job(hold_input_end=
True)`), with a draining one once every input is answered.

"Answered" is read from the REST API: the file source's tasks are FINISHED (a task ends
only after the tasks it feeds have processed all its records) and, in a metrics snapshot
taken afterwards, the agent has no call in flight, no busy key and no waiting input. The
REST API serves metrics fetched up to `metrics.fetcher.update-interval` plus a poll
earlier, so an idle reading counts once the source has been seen finished for that long
plus two polls: the agent has then had every input since before the snapshot was taken,
and no new one comes. (How soon the source is seen finished depends on the job details'
cache, `rest.cache.execution-graph.timeout`: 3 s unless set.) Should it still have work
(a restore after the check, say), the drain finishes it as an unheld input would: nothing
is lost.
A spec whose runs wait for people or time (approvals, follow-ups) is refused on a read-once
input (`jobs.spec.check_runnable`), so no held job has parked runs or waiting follow-ups;
`savepoint --drain` turns any into `ApprovalPending` / `FollowupPending` dead letters.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamagents.jobs.cluster.resume import newest_savepoint
from streamagents.jobs.cluster.standalone import rest_call
from streamagents.jobs.graph import SOURCE_NAME

__all__ = ["StopError", "finish_when_answered", "input_answered", "stop_with_savepoint"]

_DEFAULT_FETCH_INTERVAL_S = 10.0
_SOURCE_VERTEX = re.compile(rf"^Source: {re.escape(SOURCE_NAME)}( |$)")
_UNREACHABLE = (urllib.error.URLError, OSError, ValueError, KeyError, TypeError)
_GONE_AFTER_S = 2.0
"""A REST API that has not answered this long after a stop was triggered may have gone away
(look for the savepoint in the target)."""
_GIVE_UP_SILENT_S = 30.0
"""A REST API that has not answered this long, with no savepoint in the target: the stop failed."""


class StopError(RuntimeError):
    """A stop-with-savepoint that could not be triggered or did not complete."""


def savepoint_uri(path_or_uri: str) -> str:
    """A savepoint target as Flink wants it: a URI as given, a local path as `file://`."""
    return path_or_uri if "://" in path_or_uri else Path(path_or_uri).resolve().as_uri()


def stop_with_savepoint(
    rest_address: str, job_id: str, target: str, *, drain: bool, timeout_s: float
) -> str:
    """Stop the job with a canonical savepoint in `target`; its location. With `drain` the
    sources end first (the watermark rises to its maximum, every input is finished)."""
    body = {"targetDirectory": savepoint_uri(target), "drain": drain, "formatType": "CANONICAL"}
    triggered_at = time.time()
    try:
        trigger = rest_call(rest_address, f"/jobs/{job_id}/stop", body)["request-id"]
    except _UNREACHABLE as exc:
        raise StopError(f"cannot stop job {job_id} at {rest_address}: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    answered_at = time.monotonic()
    while time.monotonic() < deadline:
        try:
            status = rest_call(rest_address, f"/jobs/{job_id}/savepoints/{trigger}")
            answered_at = time.monotonic()
        except _UNREACHABLE:
            status = {}
        silent_s = time.monotonic() - answered_at
        if silent_s >= _GONE_AFTER_S:
            # The cluster may have gone: a local one (`run`'s) ends with its job, so the stop
            # may have completed unseen. Its savepoint, if whole, is in the target.
            found = newest_savepoint(target, job_id, since=triggered_at)
            if found is not None:
                return found if "://" in found else f"file:{found}"  # as Flink gives it
            if silent_s >= _GIVE_UP_SILENT_S:
                raise StopError(
                    f"the JobManager at {rest_address} has not answered for "
                    f"{_GIVE_UP_SILENT_S:.0f} s since the stop of job {job_id} was triggered, "
                    f"and no savepoint of it is in {target}"
                )
        if status.get("status", {}).get("id") == "COMPLETED":
            operation = status.get("operation", {})
            if "location" in operation:
                return str(operation["location"])
            cause = operation.get("failure-cause", {}).get("stack-trace", "unknown cause")
            raise StopError(f"savepoint failed: {cause.splitlines()[0]}")
        time.sleep(0.5)
    raise StopError(
        f"savepoint not finished after {timeout_s:.0f} s ({_stop_progress(rest_address, job_id)})"
    )


def _stop_progress(rest_address: str, job_id: str) -> str:
    """Where a stop that did not finish got to, from the REST API: the job's state and its
    latest savepoint's (how many subtasks acknowledged it)."""
    state = "unknown: the REST API does not answer"
    with contextlib.suppress(*_UNREACHABLE):
        state = str(rest_call(rest_address, f"/jobs/{job_id}")["state"])
    try:
        history = rest_call(rest_address, f"/jobs/{job_id}/checkpoints")["history"]
        savepoints = [entry for entry in history if entry.get("is_savepoint")]
    except (*_UNREACHABLE, AttributeError):
        savepoints = []
    if not savepoints:
        return f"job {state}, no savepoint started"
    latest = max(savepoints, key=lambda entry: int(entry.get("id", 0)))
    return (
        f"job {state}, savepoint {latest.get('id')} {latest.get('status')}: "
        f"{latest.get('num_acknowledged_subtasks')} of {latest.get('num_subtasks')} subtasks "
        "acknowledged"
    )


def _source_finished(job: dict[str, Any]) -> bool:
    """Whether every task of the file source in `job` (the REST API's job details) finished."""
    sources = [v for v in job["vertices"] if _SOURCE_VERTEX.match(str(v.get("name", "")))]
    return bool(sources) and all(v.get("status") == "FINISHED" for v in sources)


_LEVELS = (".in_flight", ".busy_keys", ".waiting_inputs")


class _AgentLevels:
    """Reads the agent's `in_flight`, `busy_keys` and `waiting_inputs` gauges of every
    subtask from the REST API, remembering where they are: once a vertex lists all of them
    (three per subtask), later reads fetch just their values, one call per poll."""

    def __init__(self, rest_address: str, job_id: str) -> None:
        self._rest_address = rest_address
        self._job_id = job_id
        self._ids: dict[str, list[str]] = {}

    def _level_ids(self, vertex: dict[str, Any]) -> list[str]:
        """The vertex's level gauges, all of them or none (some subtask not reporting yet)."""
        vertex_id = str(vertex["id"])
        if vertex_id not in self._ids:
            listed = rest_call(self._rest_address, self._base(vertex_id))
            ids = [m["id"] for m in listed if str(m["id"]).endswith(_LEVELS)]
            if not ids or len(ids) < len(_LEVELS) * int(vertex.get("parallelism", 1)):
                return []
            self._ids[vertex_id] = ids
        return self._ids[vertex_id]

    def _base(self, vertex_id: str) -> str:
        return f"/jobs/{self._job_id}/vertices/{vertex_id}/metrics"

    def idle(self, job: dict[str, Any]) -> bool:
        """Whether the job details `job` show an agent with every level gauge reported and
        at 0 in every subtask (the sources carry none and are not asked)."""
        reported = 0
        for vertex in job["vertices"]:
            if str(vertex.get("name", "")).startswith("Source: "):
                continue
            ids = self._level_ids(vertex)
            if not ids:
                continue
            query = f"{self._base(str(vertex['id']))}?get={','.join(ids)}"
            values = {m["id"]: int(float(m["value"])) for m in rest_call(self._rest_address, query)}
            if any(values.get(i) != 0 for i in ids):
                return False
            reported += 1
        return reported > 0


def _input_progress(rest_address: str, job_id: str, levels: _AgentLevels) -> tuple[bool, bool]:
    """(the job runs and its file source has finished, and besides the agent looks idle)."""
    try:
        job = rest_call(rest_address, f"/jobs/{job_id}")
        if job["state"] != "RUNNING" or not _source_finished(job):
            return False, False
        return True, levels.idle(job)
    except _UNREACHABLE:
        return False, False


def input_answered(rest_address: str, job_id: str, levels: _AgentLevels | None = None) -> bool:
    """Whether the job runs, its file source has finished and the agent is idle (as the
    REST API's metrics show it, see the module docstring); `levels` may remember where the
    agent's gauges are between calls."""
    return all(_input_progress(rest_address, job_id, levels or _AgentLevels(rest_address, job_id)))


def _fetch_interval_s(rest_address: str) -> float:
    """The JobManager's `metrics.fetcher.update-interval`, in seconds (default 10)."""
    try:
        entries: list[dict[str, Any]] = rest_call(rest_address, "/jobmanager/config")
    except _UNREACHABLE:
        return _DEFAULT_FETCH_INTERVAL_S
    for entry in entries:
        if entry.get("key") == "metrics.fetcher.update-interval":
            return _duration_s(str(entry.get("value", "")))
    return _DEFAULT_FETCH_INTERVAL_S


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|min|m|h)?\s*$")
_UNIT_S = {None: 0.001, "ms": 0.001, "s": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


def _duration_s(text: str) -> float:
    """A Flink duration (`10000`, `500 ms`, `10 s`, `1 min`) in seconds; the default when
    it is written some other way."""
    found = _DURATION.match(text)
    if found is None:
        return _DEFAULT_FETCH_INTERVAL_S
    return int(found.group(1)) * _UNIT_S[found.group(2)]


def finish_when_answered(
    rest_address: str,
    job_id: str,
    target: str,
    done: threading.Event,
    *,
    poll_s: float = 0.25,
    fetch_interval_s: float | None = None,
    timeout_s: float = 300.0,
    announce: Callable[[], None] = lambda: None,
) -> str | None:
    """Stop the held job with a draining savepoint in `target` once its input is answered
    (idle in metrics fetched after its source was seen finished: once that was a metrics
    fetch interval plus two polls ago), calling `announce` first;
    the savepoint's location, or None when `done` was set first. The fetch interval is
    `fetch_interval_s` when the caller configured the cluster, else read from the
    JobManager (10 s when it does not answer in time). A failed stop is tried
    again while the job runs."""
    if fetch_interval_s is None:
        fetch_interval_s = _fetch_interval_s(rest_address)
    quiet_s = fetch_interval_s + 2 * poll_s
    levels = _AgentLevels(rest_address, job_id)
    finished_since: float | None = None
    while not done.wait(poll_s):
        finished, idle = _input_progress(rest_address, job_id, levels)
        if not finished:
            finished_since = None
            continue
        now = time.monotonic()
        finished_since = now if finished_since is None else finished_since
        # Only metrics fetched after the source was seen finished count (see above).
        if not idle or now - finished_since < quiet_s:
            continue
        announce()
        try:
            return stop_with_savepoint(
                rest_address, job_id, target, drain=True, timeout_s=timeout_s
            )
        except StopError:
            finished_since = None
    return None
