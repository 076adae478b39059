"""The event-log sink: a PyFlink function that writes event JSON records to Avro files.

`sink_event_log` attaches one `EventLogSinkFunction` per subtask to a stream of
`AgentEvent` JSON strings. Each subtask owns an `EventLogWriter`, so parallel subtasks
write distinct files. A record that is not a valid event is not dropped silently: an
`error` event naming the reason takes its place. The agent function can also carry an
(unopened) `EventLogSinkFunction` from `event_log_writer` and drive it itself — open,
`write_events`, close — so its events skip the side output and a second operator.

PyFlink 2.3 (thread mode) calls a Python function's `close()` only at the end of a bounded
input: not on stop-with-savepoint, cancel, failover or a kill, and Python functions get no
checkpoint hook. So the sink does not rely on `close()`: a background thread writes the
buffered events out every `flush_seconds` (and rolls files by age), and `open()` finalizes
the in-progress files an earlier attempt left behind, cut after their last complete block.
An earlier attempt still alive in this interpreter (a restart after a failure in thread
mode: its `close()` never ran, its flusher still ticks) is closed first, losing nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pyflink.datastream import DataStream, ProcessFunction, RuntimeContext

from streamagents.connectors.eventlog import (
    DEFAULT_FLUSH_SECONDS,
    DEFAULT_ROLL_BYTES,
    DEFAULT_ROLL_SECONDS,
    EventLogWriter,
    finalize_in_progress,
)
from streamagents.operators.flink._task_watch import TaskWatch
from streamagents.serde.avro import LogLevel
from streamagents.serde.events import AgentEvent, EventType, RunEvent, new_event
from streamagents.serde.safe_text import redact_secrets

__all__ = [
    "EventLogSinkFunction",
    "event_log_writer",
    "invalid_record_event",
    "sink_event_log",
    "subtask_index",
]

# The open sink of each (directory, subtask index) in this interpreter, so that a restarted
# attempt can close the one it replaces.
_LIVE: dict[tuple[str, int], EventLogSinkFunction] = {}
_LIVE_LOCK = threading.Lock()


def invalid_record_event(raw: str | RunEvent, error: ValueError) -> str:
    """The JSON `error` event that stands in for a record the log could not take (JSON
    text, or a runtime's event holding what the log refuses, such as inline media)."""
    job_id = "unknown"
    if isinstance(raw, RunEvent):
        job_id, length = raw.job_id, None
    else:
        length = len(raw)
        try:
            found = json.loads(raw)
            if isinstance(found, dict) and isinstance(found.get("job_id"), str):
                job_id = found["job_id"]
        except ValueError:
            pass
    if isinstance(error, ValidationError):
        problems = (
            f"{'.'.join(str(step) for step in problem['loc']) or 'record'}: {problem['msg']}"
            for problem in error.errors(include_url=False, include_input=False)
        )
        reason = "event log record rejected: " + "; ".join(problems)
    else:
        reason = f"event log record rejected: {type(error).__name__}: {error}"
    event = new_event(
        EventType.ERROR,
        job_id=job_id,
        key=None,
        run_id=None,
        sequence=0,
        error_class="InvalidEventRecord",
        error_message=reason,
        record_length=length,
    )
    return event.model_dump_json()


def subtask_index(runtime_context: RuntimeContext) -> int:
    """This subtask's index, also in thread mode where PyFlink 2.3's own getter fails.

    In thread mode PyFlink calls the Java `getIndexOfThisSubtask()`, which Flink 2 moved to
    `getTaskInfo()`; the Java context is then asked through its task info instead."""
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:
        java_context = runtime_context._runtime_context  # type: ignore[attr-defined]
        return int(java_context.getTaskInfo().getIndexOfThisSubtask())


class EventLogSinkFunction(ProcessFunction):
    """Writes each incoming event JSON string to this subtask's rolling Avro files."""

    def __init__(
        self,
        directory: str,
        level: str,
        roll_bytes: int,
        roll_seconds: float,
        flush_seconds: float = DEFAULT_FLUSH_SECONDS,
    ) -> None:
        self.directory = directory
        self.level = level
        self.roll_bytes = roll_bytes
        self.roll_seconds = roll_seconds
        self.flush_seconds = flush_seconds
        self.writer: EventLogWriter | None = None
        self._stop: threading.Event | None = None
        self._key: tuple[str, int] | None = None
        self._watch: TaskWatch | None = None

    def open(
        self,
        runtime_context: RuntimeContext,
        watch: bool = True,
        redact: Callable[[str], str] = redact_secrets,
    ) -> None:
        """Finalize files earlier attempts left in progress, start the writer and its flusher,
        and (`watch`) a `TaskWatch` that closes the sink if its task ends without `close()`
        (PyFlink calls none on cancel or failure); a function that carries the sink and
        closes it passes False, and its job's `Redactor` as `redact` (events arriving as
        JSON were redacted by the function that emitted them).

        Taken: this subtask index's files (an earlier attempt of this subtask, now gone) and
        files of any index not touched for twice roll_seconds (a live writer rolls sooner)."""
        index = subtask_index(runtime_context)
        self._key = (str(Path(self.directory).resolve()), index)
        with _LIVE_LOCK:
            previous = _LIVE.get(self._key)
            _LIVE[self._key] = self
        if previous is not None:
            previous.close()
        finalize_in_progress(self.directory, subtask=index, stale_after=2 * self.roll_seconds)
        writer = EventLogWriter(
            self.directory,
            level=self.level,
            roll_bytes=self.roll_bytes,
            roll_seconds=self.roll_seconds,
            flush_seconds=self.flush_seconds,
            subtask=index,
            redact=redact,
        )
        self.writer = writer
        stop = self._stop = threading.Event()
        tick = min(self.flush_seconds, self.roll_seconds) / 2

        def flush_while_running() -> None:
            while not stop.wait(tick):
                writer.roll_if_due()

        threading.Thread(target=flush_while_running, name="event-log-flush", daemon=True).start()
        self._watch = TaskWatch(self.close) if watch else None

    def process_element(self, value: str, ctx: ProcessFunction.Context) -> Any:
        """Append one event; an invalid record is logged as an error event instead."""
        self.write_events((value,))
        return iter(())

    def write_events(self, events: Iterable[str | RunEvent | AgentEvent]) -> None:
        """Append events (JSON text, or the agent function's `RunEvent`s); an invalid record
        is logged as an error event instead."""
        writer = self.writer
        assert writer is not None, "open() starts the writer"
        writer.write_all(events, invalid=invalid_record_event)

    def close(self) -> None:
        """Stop the flusher and finish the open file: at the end of bounded input, when the
        agent function writing here closes (its task ended), or at a restart's `open()`."""
        with _LIVE_LOCK:
            if self._key is not None and _LIVE.get(self._key) is self:
                del _LIVE[self._key]
        if self._watch is not None:
            self._watch.stop()
        stop, self._stop = self._stop, None  # taken first: a restart and the task watch
        writer, self.writer = self.writer, None  # may both close a previous attempt's sink
        if stop is not None:
            stop.set()
        if writer is not None:
            writer.close()


def event_log_writer(
    directory: str,
    level: str = "standard",
    roll_bytes: int = DEFAULT_ROLL_BYTES,
    roll_seconds: float = DEFAULT_ROLL_SECONDS,
    flush_seconds: float = DEFAULT_FLUSH_SECONDS,
) -> EventLogSinkFunction | None:
    """The (unopened) sink function writing Avro event log files in `directory`; None for
    level `off`. Give it to `agent_stream(event_log=...)` to write from the agent function."""
    if LogLevel.parse(level) is LogLevel.OFF:
        return None
    return EventLogSinkFunction(directory, level, roll_bytes, roll_seconds, flush_seconds)


def sink_event_log(
    events: DataStream,
    directory: str,
    level: str = "standard",
    roll_bytes: int = DEFAULT_ROLL_BYTES,
    roll_seconds: float = DEFAULT_ROLL_SECONDS,
    flush_seconds: float = DEFAULT_FLUSH_SECONDS,
) -> None:
    """Write a stream of `AgentEvent` JSON strings as Avro event log files in `directory`.

    Run the job with `env.execute()` / `execute_async()`: PyFlink 2.3's `execute_and_collect`
    keeps only the collected stream's own operators, so this branch would not run."""
    function = event_log_writer(directory, level, roll_bytes, roll_seconds, flush_seconds)
    if function is not None:
        events.process(function).name("event-log-sink").uid("streamagents-event-log-sink")
