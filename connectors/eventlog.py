"""Event log files: Avro object container files written atomically, rolled, and read back.

`EventLogWriter` appends events to `<directory>/.<name>.avro.inprogress` and renames the
file to `<name>.avro` when it rolls (by size or age) or closes, so a finished name never
holds a half-written file. Names carry the UTC start time, the writer's subtask index and a
random id, so parallel writers (and restarted ones) never collide. Files use the deflate
codec unless fastavro can write zstandard here. `read_events` reads finished files under
any shipped schema version; each file's own writer schema is resolved to it.
"""

from __future__ import annotations

import functools
import io
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import fastavro
from fastavro.write import Writer
from streamagents.serde.avro import (
    DEFAULT_TEXT_LIMIT,
    LATEST_VERSION,
    LogLevel,
    from_record,
    parsed_schema,
    to_record,
)
from streamagents.serde.events import AgentEvent

__all__ = [
    "DEFAULT_ROLL_BYTES",
    "DEFAULT_ROLL_SECONDS",
    "EventLogWriter",
    "default_codec",
    "event_log_files",
    "read_events",
]

DEFAULT_ROLL_BYTES = 64 * 1024 * 1024
DEFAULT_ROLL_SECONDS = 300.0
_SUFFIX = ".avro"
_IN_PROGRESS = ".inprogress"


@functools.cache
def default_codec() -> str:
    """`zstandard` when fastavro can write it in this environment, else `deflate`."""
    probe = Writer(io.BytesIO(), "long", codec="zstandard")
    probe.write(1)
    try:
        probe.flush()
    except ValueError:  # fastavro lacks its zstandard library here
        return "deflate"
    return "zstandard"


class EventLogWriter:
    """Writes events to rolling Avro files in one directory; one writer per subtask."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        level: LogLevel | str = LogLevel.STANDARD,
        roll_bytes: int = DEFAULT_ROLL_BYTES,
        roll_seconds: float = DEFAULT_ROLL_SECONDS,
        subtask: int = 0,
        prefix: str = "events",
        version: int = LATEST_VERSION,
        codec: str | None = None,
        text_limit: int = DEFAULT_TEXT_LIMIT,
    ) -> None:
        if roll_bytes <= 0 or roll_seconds <= 0:
            raise ValueError("event log: roll_bytes and roll_seconds must be positive")
        self.level = LogLevel.parse(level)
        self.directory = Path(directory)
        self.roll_bytes = roll_bytes
        self.roll_seconds = roll_seconds
        self.subtask = subtask
        self.prefix = prefix
        self.version = version
        self.codec = codec or default_codec()
        self.text_limit = text_limit
        self.schema = parsed_schema(version)
        self.finished: list[Path] = []
        self.events_written = 0
        self._writer_id = uuid.uuid4().hex[:12]
        self._file_index = 0
        self._file: io.BufferedWriter | None = None
        self._avro: Writer | None = None
        self._in_progress: Path | None = None
        self._final: Path | None = None
        self._opened_at = 0.0
        if self.level is not LogLevel.OFF:
            self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, event: AgentEvent | dict[str, Any] | str) -> None:
        """Append one event (model, JSON text or JSON-form dict); rolls the file when due."""
        if self.level is LogLevel.OFF:
            return
        record = to_record(
            event, version=self.version, level=self.level, text_limit=self.text_limit
        )
        self.write_record(record)

    def write_record(self, record: dict[str, Any]) -> None:
        """Append an Avro record already built by `to_record` for this writer's version."""
        if self.level is LogLevel.OFF:
            return
        if self._avro is None:
            self._open()
        assert self._avro is not None and self._file is not None
        self._avro.write(record)
        self.events_written += 1
        if self._file.tell() + self._avro.io.tell() >= self.roll_bytes:
            self.roll()
        else:
            self.roll_if_due()

    def write_all(self, events: Iterable[AgentEvent | dict[str, Any] | str]) -> None:
        """Append every event of `events`."""
        for event in events:
            self.write(event)

    def roll_if_due(self, now: float | None = None) -> None:
        """Finish the open file when it is older than roll_seconds."""
        if self._avro is not None:
            age = (time.monotonic() if now is None else now) - self._opened_at
            if age >= self.roll_seconds:
                self.roll()

    def roll(self) -> None:
        """Finish the open file (flush, fsync, rename to its final name), if there is one."""
        if self._avro is None or self._file is None:
            return
        assert self._in_progress is not None and self._final is not None
        self._avro.flush()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._in_progress, self._final)
        self.finished.append(self._final)
        self._avro = self._file = self._in_progress = self._final = None

    def close(self) -> None:
        """Finish the open file; the writer can be used again afterwards."""
        self.roll()

    def __enter__(self) -> EventLogWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _open(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name = (
            f"{self.prefix}-{stamp}-{self.subtask:04d}-{self._writer_id}-"
            f"{self._file_index:05d}{_SUFFIX}"
        )
        self._file_index += 1
        self._final = self.directory / name
        self._in_progress = self.directory / f".{name}{_IN_PROGRESS}"
        self._file = open(self._in_progress, "xb")  # noqa: SIM115 - closed in roll()
        metadata = {"streamagents.eventlog.version": str(self.version)}
        self._avro = Writer(self._file, self.schema, codec=self.codec, metadata=metadata)
        self._opened_at = time.monotonic()


def event_log_files(path: str | os.PathLike[str]) -> list[Path]:
    """The finished event log files at `path` (a file, or a directory searched recursively)."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"event log: no file or directory at {root}")
    return sorted(p for p in root.rglob(f"*{_SUFFIX}") if not p.name.startswith("."))


def read_events(
    path: str | os.PathLike[str], version: int | None = None, *, typed: bool = False
) -> Iterator[Any]:
    """Yield the events at `path` as records of schema `version` (default newest).

    Every file is resolved from its own writer schema to the requested one: older files
    get defaults for fields added later, fields a reader does not know are dropped. With
    `typed=True` the events come as `AgentEvent` models instead of dicts."""
    reader_schema = parsed_schema(LATEST_VERSION if version is None else version)
    for file in event_log_files(path):
        with open(file, "rb") as handle:
            for record in fastavro.reader(handle, reader_schema=reader_schema):
                yield from_record(record) if typed else record
