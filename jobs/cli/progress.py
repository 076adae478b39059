"""Progress of a running job, read from Flink's REST API metrics, and the end-of-run summary.

Records in are the source's `numRecordsOut`; finished and failed runs and runs in flight
are the agent operator's `runs_finished`, `runs_failed` and `in_flight` metrics (with its
`busy_keys` and `waiting_inputs`, which tell when a held input is answered); dead
letters are what the dead-letter sink's writer received. The summary at the end counts the
committed files themselves, since the metrics die with the job.
"""

from __future__ import annotations

import re
import urllib.error
from dataclasses import dataclass, fields
from pathlib import Path

from streamagents.connectors.files import read_jsonl
from streamagents.jobs.cluster.standalone import rest_call
from streamagents.jobs.graph import DEAD_LETTERS_NAME, SOURCE_NAME
from streamagents.jobs.spec import JobSpec

__all__ = [
    "TERMINAL_STATES",
    "Progress",
    "job_state",
    "latest_failure",
    "latest_savepoint",
    "read_progress",
    "summary",
]

TERMINAL_STATES = frozenset({"FINISHED", "FAILED", "CANCELED", "SUSPENDED"})

# Progress fields and the metric id suffixes (after "<subtask>.<operator>") summed into
# them over all subtasks. Dead letters: the file sink's writer, or a Kafka sink's keying step.
_SUFFIXES = (
    ("records_in", f"Source__{SOURCE_NAME}.numRecordsOut"),
    ("runs_finished", ".runs_finished"),
    ("runs_failed", ".runs_failed"),
    ("in_flight", ".in_flight"),
    ("busy_keys", ".busy_keys"),
    ("waiting_inputs", ".waiting_inputs"),
    ("dead_letters", f"{DEAD_LETTERS_NAME}__Writer.numRecordsIn"),
    ("dead_letters", f"{DEAD_LETTERS_NAME}-key.numRecordsIn"),
)


@dataclass(frozen=True)
class Progress:
    """Counters of a running job; None where the metric is not (yet) reported."""

    records_in: int | None = None
    runs_finished: int | None = None
    runs_failed: int | None = None
    in_flight: int | None = None
    dead_letters: int | None = None
    busy_keys: int | None = None
    waiting_inputs: int | None = None

    def line(self) -> str:
        """One status line, e.g. `in 7 | finished 5 (1 failed) | in flight 0 | dead letters 2`."""

        def show(value: int | None) -> str:
            return "-" if value is None else str(value)

        return (
            f"in {show(self.records_in)} | finished {show(self.runs_finished)} "
            f"({show(self.runs_failed)} failed) | in flight {show(self.in_flight)} | "
            f"dead letters {show(self.dead_letters)}"
        )


def job_state(rest_address: str, job_id: str) -> str | None:
    """The job's state (RUNNING, FINISHED, ...), or None when the REST API does not answer."""
    try:
        return str(rest_call(rest_address, f"/jobs/{job_id}")["state"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None


_OUR_FRAME = re.compile(
    r"at \S*/(?:streamagents|operators|connectors|jobs|serde)/[\w/]+\.\w+\(.*\)"
)


def latest_failure(rest_address: str, job_id: str) -> tuple[int, str] | None:
    """(timestamp, one-line description) of the job's latest task failure, if any: the
    exception's first line and the first frame in streamagents code."""
    try:
        entries = rest_call(rest_address, f"/jobs/{job_id}/exceptions")["exceptionHistory"][
            "entries"
        ]
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None
    if not entries:
        return None
    latest = max(entries, key=lambda entry: int(entry.get("timestamp", 0)))
    trace = str(latest.get("stacktrace", ""))
    description = trace.splitlines()[0] if trace else str(latest.get("exceptionName"))
    frame = _OUR_FRAME.search(trace)
    if frame:
        description += f" ({frame.group(0)})"
    return int(latest.get("timestamp", 0)), description


def latest_savepoint(rest_address: str, job_id: str) -> str | None:
    """Where the job's latest completed savepoint is, if it has one and the REST API answers."""
    try:
        latest = rest_call(rest_address, f"/jobs/{job_id}/checkpoints")["latest"]
        path = (latest.get("savepoint") or {}).get("external_path")
    except (urllib.error.URLError, OSError, ValueError, KeyError, AttributeError):
        return None
    return str(path) if path else None


def read_progress(rest_address: str, job_id: str) -> Progress | None:
    """Sum the progress metrics over every vertex and subtask; None when unreachable."""
    totals: dict[str, int] = {}
    try:
        vertices = rest_call(rest_address, f"/jobs/{job_id}")["vertices"]
        for vertex in vertices:
            base = f"/jobs/{job_id}/vertices/{vertex['id']}/metrics"
            ids = [m["id"] for m in rest_call(rest_address, base)]
            wanted = {i: name for i in ids for name, end in _SUFFIXES if i.endswith(end)}
            if not wanted:
                continue
            for metric in rest_call(rest_address, f"{base}?get={','.join(wanted)}"):
                name = wanted[metric["id"]]
                totals[name] = totals.get(name, 0) + int(float(metric["value"]))
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None
    return Progress(**{f.name: totals.get(f.name) for f in fields(Progress)})


def summary(spec: JobSpec, state: str, seconds: float, last: Progress | None) -> str:
    """The end-of-run report: what was read, answered and rejected, and where it all is."""
    lines = [f"{spec.name}: {state} after {seconds:.1f} s"]
    if last is not None and last.records_in:
        lines.append(f"  inputs read   {last.records_in}")
    outputs_sink, dead_sink = spec.sinks.outputs, spec.sinks.dead_letters
    if outputs_sink.path is not None:
        outputs = read_jsonl(outputs_sink.path)
        ok = sum(1 for record in outputs if record.get("status") == "ok")
        lines.append(
            f"  answers       {len(outputs)} ({ok} ok, {len(outputs) - ok} error)"
            f"  -> {outputs_sink.path}"
        )
    elif last is not None and last.runs_finished is not None:
        lines.append(f"  answers       {last.runs_finished}  -> {outputs_sink.describe()}")
    if dead_sink.path is not None:
        lines.append(f"  dead letters  {len(read_jsonl(dead_sink.path))}  -> {dead_sink.path}")
    elif last is not None and last.dead_letters is not None:
        lines.append(f"  dead letters  {last.dead_letters}  -> {dead_sink.describe()}")
    event_log = spec.event_log
    if event_log is not None and event_log.level != "off" and event_log.kafka is not None:
        lines.append(f"  event log     -> {event_log.describe()}")
    elif event_log is not None and event_log.level != "off":
        log_dir = Path(str(event_log.path))
        files = [p for p in log_dir.rglob("*") if p.is_file() and not p.name.startswith(".")]
        lines.append(
            f"  event log     {len(files)} file(s)  -> {log_dir}"
            f"  (read it: streamagents eventlog cat {log_dir})"
        )
    return "\n".join(lines)
