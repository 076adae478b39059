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
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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
    "SYNC_INTERVAL",
    "EventLogWriter",
    "default_codec",
    "event_log_files",
    "read_events",
]

DEFAULT_ROLL_BYTES = 64 * 1024 * 1024
DEFAULT_ROLL_SECONDS = 300.0
SYNC_INTERVAL = 256 * 1024  # bytes per Avro block before compression: bigger blocks pack better
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


@dataclass
class _OpenFile:
    """The file a writer is filling: its handle, Avro writer, names and start time."""

    handle: BinaryIO
    avro: Writer
    in_progress: Path
    final: Path
    opened_at: float


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
        self._current: _OpenFile | None = None
        if self.level is not LogLevel.OFF:
            self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, event: AgentEvent | str) -> None:
        """Append one event (a model or its JSON text); rolls the file when due."""
        if self.level is LogLevel.OFF:
            return
        record = to_record(
            event, version=self.version, level=self.level, text_limit=self.text_limit
        )
        current = self._current or self._open()
        current.avro.write(record)
        self.events_written += 1
        if current.handle.tell() + current.avro.io.tell() >= self.roll_bytes:
            self.roll()
        else:
            self.roll_if_due()

    def write_all(self, events: Iterable[AgentEvent | str]) -> None:
        """Append every event of `events`."""
        for event in events:
            self.write(event)

    @property
    def opened_at(self) -> float | None:
        """`time.monotonic()` when the open file was started, or None when none is open."""
        return None if self._current is None else self._current.opened_at

    def roll_if_due(self, now: float | None = None) -> None:
        """Finish the open file when it is older than roll_seconds."""
        current = self._current
        if current is not None:
            age = (time.monotonic() if now is None else now) - current.opened_at
            if age >= self.roll_seconds:
                self.roll()

    def roll(self) -> None:
        """Finish the open file (flush, fsync, rename to its final name), if there is one."""
        current, self._current = self._current, None
        if current is None:
            return
        current.avro.flush()
        current.handle.flush()
        os.fsync(current.handle.fileno())
        current.handle.close()
        os.replace(current.in_progress, current.final)
        self.finished.append(current.final)

    def close(self) -> None:
        """Finish the open file; the writer can be used again afterwards."""
        self.roll()

    def __enter__(self) -> EventLogWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _open(self) -> _OpenFile:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name = (
            f"{self.prefix}-{stamp}-{self.subtask:04d}-{self._writer_id}-"
            f"{self._file_index:05d}{_SUFFIX}"
        )
        self._file_index += 1
        in_progress = self.directory / f".{name}{_IN_PROGRESS}"
        handle = open(in_progress, "xb")  # noqa: SIM115 - closed in roll()
        avro = Writer(
            handle,
            self.schema,
            codec=self.codec,
            metadata={"streamagents.eventlog.version": str(self.version)},
            sync_interval=SYNC_INTERVAL,
        )
        self._current = _OpenFile(
            handle, avro, in_progress, self.directory / name, time.monotonic()
        )
        return self._current


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
            records = fastavro.reader(handle)
            writer_schema = fastavro.parse_schema(json.loads(records.metadata["avro.schema"]))
            if writer_schema != reader_schema:  # resolving costs; skip it when they match
                handle.seek(0)
                records = fastavro.reader(handle, reader_schema=reader_schema)
            for record in records:
                yield from_record(record) if typed else record
