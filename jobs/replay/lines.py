"""What a replay runs: the recorded runs of an event log, chosen and turned into input lines.

`recorded_runs` reads an event log (files) into one `RecordedRun` per run that has an
`input` event: its key, input id, the key's run sequence, when it began, the input line as
the log kept it (whole at `verbose`, a prefix at `standard`) and its tool calls with their
results. `choose` filters them (keys, time range, a deterministic sample); `replay_lines`
turns them into the lines a replay job reads, in the recorded order: the recorded input
line with its input id and the two replay fields (`_replay_of`, `_replay_tools`, see
`streamagents.operators.agent.replay`). A run whose input the log clipped, or does not
hold (a log older than schema v8), is read from the source the user names (`InputSource`,
joined by input id) or reported as not replayable with the reason: it is never replayed
from a prefix. Nor is a run the log holds only in part (an event of an event-log topic
whose whole form the media store could not give): it is reported as not replayable.
`copy_media` puts the media those lines refer to into the replay's own media store, so the
replay job reads production's store and never writes to it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from streamagents.connectors.eventlog import DamagedFile, read_events
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.replay import (
    REPLAY_OF_FIELD,
    REPLAY_TOOLS_FIELD,
    RecordedToolCall,
)
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import MediaRef

__all__ = [
    "InputSource",
    "NotReplayable",
    "RecordedRun",
    "choose",
    "copy_media",
    "parse_time_ms",
    "recorded_runs",
    "replay_lines",
]


@dataclass
class RecordedRun:
    """One recorded run as a replay needs it."""

    run_id: str
    key: str
    input_id: str
    timestamp_ms: int
    key_sequence: int | None
    input_record: str | None
    clipped: bool
    tools: list[RecordedToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class NotReplayable:
    """A recorded run the replay leaves out, and why (a line of `not_replayable.jsonl`)."""

    run_id: str
    key: str
    input_id: str
    reason: str

    def json(self) -> str:
        """Its JSON line."""
        return json.dumps(self.__dict__, ensure_ascii=False)


def recorded_runs(
    paths: Sequence[str | Path], damaged: list[DamagedFile] | None = None
) -> list[RecordedRun]:
    """The runs with an `input` event in the event-log files or folders at `paths`, in the
    order their inputs were recorded; damaged files are read up to the damage (`damaged`)."""
    runs: dict[str, RecordedRun] = {}
    requests: dict[str, dict[str, Any]] = {}  # (run, call id) -> the call
    results: list[tuple[str, Any]] = []
    for path in paths:
        for event in read_events(path, typed=True, damaged=damaged):
            _take(event, runs, requests, results)
    for run_id, message in results:
        run = runs.get(run_id)
        call = requests.get(f"{run_id}\n{message.tool_call_id}")
        if run is not None and call is not None:
            run.tools.append(
                RecordedToolCall(name=call["name"], arguments=call["arguments"], result=message)
            )
    return sorted(runs.values(), key=lambda r: (r.timestamp_ms, r.key_sequence or 0, r.run_id))


def _take(
    event: AgentEvent,
    runs: dict[str, RecordedRun],
    requests: dict[str, dict[str, Any]],
    results: list[tuple[str, Any]],
) -> None:
    """Note what one event tells a replay."""
    run_id, payload = event.run_id, event.payload
    if run_id is None:
        return
    if payload.kind == "input" and event.key is not None:
        runs[run_id] = RecordedRun(
            run_id=run_id,
            key=event.key,
            input_id=payload.input_id or "",
            timestamp_ms=event.timestamp_ms,
            key_sequence=payload.key_sequence,
            input_record=payload.input_record,
            clipped=bool(payload.input_record_clipped),
        )
    elif payload.kind == "tool_request":
        for call in payload.tool_calls:
            requests[f"{run_id}\n{call.id}"] = {"name": call.name, "arguments": call.arguments}
    elif payload.kind == "tool_response":
        results.extend((run_id, message) for message in payload.tool_results)


def parse_time_ms(text: str) -> int:
    """A time given on the command line: milliseconds since the epoch, or ISO 8601 (UTC
    unless it names its zone)."""
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)


def _sampled(run_id: str, fraction: float) -> bool:
    """Whether a run is in a sample of `fraction` of the runs: the same runs every time."""
    digest = int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)
    return digest < fraction * 0x1_0000_0000


def choose(
    runs: Iterable[RecordedRun],
    *,
    keys: set[str] | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    sample: float | None = None,
) -> list[RecordedRun]:
    """The runs of the given keys that began in [since, until), sampled by run id."""
    return [
        run
        for run in runs
        if (keys is None or run.key in keys)
        and (since_ms is None or run.timestamp_ms >= since_ms)
        and (until_ms is None or run.timestamp_ms < until_ms)
        and (sample is None or _sampled(run.run_id, sample))
    ]


class InputSource:
    """Input lines from JSONL files, by input id: a line's `id`, or for a line without one
    the sha256 of the line (the input id `<sha256>-<n>` the engine gave it starts with it).

    Bytes that are not UTF-8 become replacement characters, as the file source gave them to
    the job; a line that is not a JSON object (too deep, not JSON) is found by its sha256."""

    def __init__(self, path: str | Path) -> None:
        root = Path(path)
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        self._lines: dict[str, str] = {}
        for file in files:
            for raw in file.read_bytes().decode("utf-8", errors="replace").splitlines():
                if raw.strip():
                    self._lines.setdefault(_line_id(raw), raw)

    def line(self, input_id: str) -> str | None:
        """The line of an input id, or None when the source has none."""
        found = self._lines.get(input_id)
        if found is None and "-" in input_id:
            found = self._lines.get(input_id.rpartition("-")[0])
        return found


def _line_id(raw: str) -> str:
    try:
        given = json.loads(raw).get("id")
    except (ValueError, AttributeError, RecursionError):
        given = None
    return given if isinstance(given, str) and given else hashlib.sha256(raw.encode()).hexdigest()


def replay_lines(
    runs: Iterable[RecordedRun],
    source: InputSource | None = None,
    unreadable: Mapping[str, str] | None = None,
) -> tuple[list[str], list[NotReplayable]]:
    """The replay job's input lines, in the runs' order, and the runs left out with why:
    among them the `unreadable` ones (run id -> why the log holds only part of the run)."""
    lines: list[str] = []
    left_out: list[NotReplayable] = []
    for run in runs:
        if unreadable and run.run_id in unreadable:
            line, reason = None, unreadable[run.run_id]
        else:
            line, reason = _input_line(run, source)
        if line is None:
            left_out.append(NotReplayable(run.run_id, run.key, run.input_id, reason))
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            reason = "its input record is not a JSON object"
            left_out.append(NotReplayable(run.run_id, run.key, run.input_id, reason))
            continue
        obj["id"] = run.input_id
        obj[REPLAY_OF_FIELD] = run.run_id
        obj[REPLAY_TOOLS_FIELD] = [tool.model_dump(mode="json") for tool in run.tools]
        lines.append(json.dumps(obj, ensure_ascii=False))
    return lines, left_out


def copy_media(lines: Iterable[str], source: MediaStore | None, scratch: MediaStore) -> list[str]:
    """Copy every media object the replay lines refer to (input parts, recorded tool
    results) from `source` (production's store, only read; None: there is none) into
    `scratch` (the replay's own); the digests `source` does not hold, whose runs then fail
    as they would have."""
    missing: list[str] = []
    for line in lines:
        for ref in _refs(json.loads(line)):
            if scratch.exists(ref):
                continue
            if source is None or not source.exists(ref):
                missing.append(ref.sha256)
                continue
            scratch.put(source.get(ref), ref.mime_type)
    return missing


def _refs(value: Any) -> Iterable[MediaRef]:
    """The media refs anywhere in a JSON value."""
    if isinstance(value, list):
        for item in value:
            yield from _refs(item)
    elif isinstance(value, dict):
        if "sha256" in value and "size_bytes" in value:
            try:
                yield MediaRef.model_validate(value)
                return
            except ValidationError:
                pass
        for item in value.values():
            yield from _refs(item)


def _input_line(run: RecordedRun, source: InputSource | None) -> tuple[str | None, str]:
    """The run's whole input line, or None and why there is none."""
    if run.input_record is not None and not run.clipped:
        return run.input_record, ""
    if source is not None:
        found = source.line(run.input_id)
        if found is not None:
            return found, ""
        missing = f"the named source has no input with id {run.input_id!r}"
    else:
        missing = "name the inputs' source with --inputs-from to join them by input id"
    if run.input_record is None:
        return None, f"the log holds no input record (written before schema v8): {missing}"
    return None, f"the log kept only a prefix of the input (level standard): {missing}"
