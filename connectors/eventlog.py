"""Event log files: Avro object container files written atomically, rolled, and read back.

`EventLogWriter` appends events to `<directory>/.<name>.avro.inprogress` and renames the
file to `<name>.avro` when it rolls (by size or age) or closes, so a finished name never
holds a half-written file. Buffered events are written out as one Avro block at least every
`flush_seconds`, so an in-progress file is a valid Avro file up to its last complete block.
Names carry the UTC start time, the writer's subtask index and a random id, so parallel
writers (and restarted ones) never collide. A writer that died before closing leaves its
in-progress file behind: `finalize_in_progress` cuts such a file after its last complete
block and gives it its finished name. Files use the deflate codec unless fastavro can write
zstandard here. `read_events` reads finished files (and, when asked, the complete blocks of
in-progress ones) under any shipped schema version; each file's own writer schema is
resolved to it.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
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
    record_encoder,
    record_maker,
)
from streamagents.serde.events import AgentEvent, RunEvent
from streamagents.serde.safe_text import clip, redact_secrets

__all__ = [
    "DEFAULT_FLUSH_SECONDS",
    "DEFAULT_ROLL_BYTES",
    "DEFAULT_ROLL_SECONDS",
    "DEFLATE_LEVEL",
    "SYNC_INTERVAL",
    "DamagedFile",
    "DamagedFileWarning",
    "EventLogWriter",
    "complete_length",
    "default_codec",
    "event_log_files",
    "finalize_in_progress",
    "read_events",
]

DEFAULT_ROLL_BYTES = 64 * 1024 * 1024
DEFAULT_ROLL_SECONDS = 300.0
DEFAULT_FLUSH_SECONDS = 1.0
SYNC_INTERVAL = 256 * 1024  # bytes per Avro block before compression: bigger blocks pack better
DEFLATE_LEVEL = 1  # zlib's fastest level: ~8% faster writes than its default 6, ~7% larger files
_SUFFIX = ".avro"
_IN_PROGRESS = ".inprogress"
_MAGIC = b"Obj\x01"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SYNC_SIZE = 16
# `.<prefix>-<UTC start>-<subtask>-<writer id>-<n>.avro.inprogress`
_IN_PROGRESS_NAME = re.compile(r"\.(.+-\d{8}T\d{6}Z-(\d{4,})-[0-9a-f]+-\d+\.avro)\.inprogress")


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


@dataclass(frozen=True)
class _EncodedBlock:
    """Records encoded by `RecordEncoder`, in the shape fastavro's `Writer.write_block`
    takes (that of a block read from a file: its record count and its bytes)."""

    num_records: int
    bytes_: io.BytesIO


@dataclass
class _OpenFile:
    """The file a writer is filling: its handle, Avro writer, names and start time."""

    handle: BinaryIO
    avro: Writer
    in_progress: Path
    final: Path
    opened_at: float
    written: int = 0
    """Bytes in the file so far (header and finished blocks, compressed)."""


class EventLogWriter:
    """Writes events to rolling Avro files in one directory; one writer per subtask. Every
    text of an event passes `redact` (the job's `Redactor`; by default, secret shapes)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        level: LogLevel | str = LogLevel.STANDARD,
        roll_bytes: int = DEFAULT_ROLL_BYTES,
        roll_seconds: float = DEFAULT_ROLL_SECONDS,
        flush_seconds: float = DEFAULT_FLUSH_SECONDS,
        subtask: int = 0,
        prefix: str = "events",
        version: int = LATEST_VERSION,
        codec: str | None = None,
        text_limit: int = DEFAULT_TEXT_LIMIT,
        redact: Callable[[str], str] = redact_secrets,
    ) -> None:
        if roll_bytes <= 0 or roll_seconds <= 0 or flush_seconds <= 0:
            raise ValueError("event log: roll_bytes, roll_seconds, flush_seconds must be positive")
        if _URI.match(os.fspath(directory)):
            raise ValueError(
                f"event log: {os.fspath(directory)!r} is a URI; the event log appends to local "
                "files, which object stores cannot do: give a local (or mounted) directory"
            )
        self.level = LogLevel.parse(level)
        self.directory = Path(directory)
        self.roll_bytes = roll_bytes
        self.roll_seconds = roll_seconds
        self.flush_seconds = flush_seconds
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
        self._flushed_at = time.monotonic()
        self._lock = threading.Lock()  # writes may race a background roll_if_due()
        self._encoder = record_encoder(version)
        self._block = bytearray()  # encoded records of the block being filled
        self._block_count = 0
        if self.level is not LogLevel.OFF:
            self._make_record = record_maker(version, self.level, text_limit, redact)
            self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, event: AgentEvent | RunEvent | str) -> None:
        """Append one event (a model, a `RunEvent` or JSON text); rolls the file when due."""
        self.write_all((event,))

    def write_all(
        self,
        events: Iterable[AgentEvent | RunEvent | str],
        invalid: Callable[[Any, ValueError], AgentEvent | str] | None = None,
    ) -> None:
        """Append every event of `events` (models, `RunEvent`s or JSON text), then roll or
        flush when due.

        An event that is not valid raises a ValueError (the events before it are kept), or,
        with `invalid`, is replaced by `invalid(event, error)`."""
        if self.level is LogLevel.OFF:
            return
        records = []
        for event in events:
            try:
                records.append(self._make_record(event))
            except ValueError as error:
                if invalid is None:
                    self._append(records)
                    raise
                records.append(self._make_record(invalid(event, error)))
        self._append(records)

    def _append(self, records: list[dict[str, Any]]) -> None:
        """Encode `records` into the block being filled; write it out at SYNC_INTERVAL."""
        if not records:
            return
        with self._lock:
            for record in records:
                current = self._current or self._open()
                self._encoder.encode_into(self._block, record)
                self._block_count += 1
                self.events_written += 1
                if len(self._block) >= SYNC_INTERVAL:
                    self._write_block()
                if current.written + len(self._block) >= self.roll_bytes:
                    self._roll()
            self._flush_if_due(time.monotonic())

    def _write_block(self) -> None:
        """Hand the encoded records to fastavro as one block (compressed, with its marker)."""
        if self._block_count and self._current is not None:
            block = _EncodedBlock(self._block_count, io.BytesIO(self._block))
            self._current.avro.write_block(block)
            self._current.written = self._current.handle.tell()
        self._block.clear()
        self._block_count = 0

    @property
    def opened_at(self) -> float | None:
        """`time.monotonic()` when the open file was started, or None when none is open."""
        return None if self._current is None else self._current.opened_at

    def roll_if_due(self, now: float | None = None) -> None:
        """Finish the open file when older than roll_seconds, else flush it when
        flush_seconds passed since the last flush; safe to call from another thread.

        `now` is a `time.monotonic()` reading (default: the current one)."""
        with self._lock:
            self._flush_if_due(time.monotonic() if now is None else now)

    def flush(self) -> None:
        """Write the buffered events out as one Avro block (to the OS, without fsync)."""
        with self._lock:
            self._flush(time.monotonic())

    def roll(self) -> None:
        """Finish the open file (flush, fsync, rename to its final name), if there is one."""
        with self._lock:
            self._roll()

    def _flush_if_due(self, now: float) -> None:
        current = self._current
        if current is None:
            return
        if now - current.opened_at >= self.roll_seconds:
            self._roll()
        elif now - self._flushed_at >= self.flush_seconds:
            self._flush(now)

    def _flush(self, now: float) -> None:
        self._flushed_at = now
        if self._current is not None:
            self._write_block()
            self._current.avro.flush()
            self._current.handle.flush()

    def _roll(self) -> None:
        current = self._current
        if current is None:
            return
        self._write_block()
        self._current = None
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
        handle = open(in_progress, "xb")  # noqa: SIM115 - closed in _roll()
        avro = Writer(
            handle,
            self.schema,
            codec=self.codec,
            metadata={"streamagents.eventlog.version": str(self.version)},
            sync_interval=SYNC_INTERVAL,
            compression_level=DEFLATE_LEVEL if self.codec == "deflate" else None,
        )
        self._current = _OpenFile(
            handle, avro, in_progress, self.directory / name, time.monotonic(), handle.tell()
        )
        self._flushed_at = self._current.opened_at
        return self._current


def _read_long(handle: BinaryIO) -> int:
    """One zigzag varint long, as Avro encodes it; EOFError when the file ends inside it."""
    shift = result = 0
    while True:
        byte = handle.read(1)
        if not byte:
            raise EOFError
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7


def _skip(handle: BinaryIO, size: int, end: int) -> None:
    if size < 0 or handle.tell() + size > end:
        raise EOFError
    handle.seek(size, os.SEEK_CUR)


def complete_length(path: str | os.PathLike[str]) -> int:
    """Bytes of `path` that form a valid Avro file: its header and every complete block.

    0 means not even the header is complete. A block counts when its whole data and the
    sync marker after it are there and the marker is the header's."""
    with open(path, "rb") as handle:
        end = os.fstat(handle.fileno()).st_size
        try:
            if handle.read(4) != _MAGIC:
                return 0
            while (count := _read_long(handle)) != 0:  # the metadata map, in blocks
                if count < 0:
                    _read_long(handle)  # the block's byte size
                for _ in range(abs(count)):
                    _skip(handle, _read_long(handle), end)  # key
                    _skip(handle, _read_long(handle), end)  # value
            sync = handle.read(_SYNC_SIZE)
            if len(sync) != _SYNC_SIZE:
                return 0
        except EOFError:
            return 0
        valid = handle.tell()
        while valid < end:
            try:
                _read_long(handle)  # records in the block
                _skip(handle, _read_long(handle), end)
            except EOFError:
                break
            if handle.read(_SYNC_SIZE) != sync:
                break
            valid = handle.tell()
        return valid


def finalize_in_progress(
    directory: str | os.PathLike[str],
    *,
    subtask: int | None = None,
    stale_after: float | None = None,
    prefix: str = "events",
) -> list[Path]:
    """Give leftover in-progress files their finished names; returns the finished paths.

    Takes the in-progress files of `subtask` (the same subtask of an earlier attempt: its
    writer is gone), and any file not modified for `stale_after` seconds (a live writer
    rolls its file within roll_seconds, so twice that is safe); with neither given, takes
    all of them. Each file is cut after its last complete block first; a file without a
    complete header holds no event and is deleted."""
    folder = Path(directory)
    if not folder.is_dir():
        return []
    now = time.time()
    finished = []
    for path in sorted(folder.glob(f".{prefix}-*{_SUFFIX}{_IN_PROGRESS}")):
        match = _IN_PROGRESS_NAME.fullmatch(path.name)
        if match is None:
            continue
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:  # another subtask took it just now
            continue
        own = subtask is not None and int(match.group(2)) == subtask
        stale = stale_after is not None and age >= stale_after
        if (subtask is not None or stale_after is not None) and not (own or stale):
            continue
        try:
            valid = complete_length(path)
            if valid == 0:
                path.unlink()
                continue
            with open(path, "r+b") as handle:
                handle.truncate(valid)
                os.fsync(handle.fileno())
            final = path.with_name(match.group(1))
            os.replace(path, final)
        except FileNotFoundError:
            continue
        finished.append(final)
    return finished


def event_log_files(
    path: str | os.PathLike[str], *, include_in_progress: bool = False
) -> list[Path]:
    """The finished event log files at `path` (a file, or a directory searched recursively).

    With `include_in_progress`, hidden in-progress files are listed too."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"event log: no file or directory at {root}")
    files = [p for p in root.rglob(f"*{_SUFFIX}") if not p.name.startswith(".")]
    if include_in_progress:
        files += root.rglob(f".*{_SUFFIX}{_IN_PROGRESS}")
    return sorted(files)


def _open_complete(file: Path) -> BinaryIO | None:
    """`file` opened for reading; an in-progress file only up to its last complete block
    (None when it has no complete header yet, or was finished and renamed meanwhile)."""
    if not file.name.endswith(_IN_PROGRESS):
        return open(file, "rb")
    try:
        valid = complete_length(file)
        with open(file, "rb") as handle:
            return io.BytesIO(handle.read(valid)) if valid else None
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class DamagedFile:
    """An event log file `read_events` could not read to its end, and why."""

    path: Path
    error: str
    """What was wrong, e.g. `EOFError: ...` or `not an Avro file`."""
    events_read: int
    """Events of this file read (and yielded) before the damage; the rest were skipped."""

    def __str__(self) -> str:
        return f"{self.path}: {self.error} (after {self.events_read} events; the rest skipped)"


class DamagedFileWarning(UserWarning):
    """Issued by `read_events` for each damaged file when no `damaged` list is given."""


def _damage(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return clip(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, 300)


def read_events(
    path: str | os.PathLike[str],
    version: int | None = None,
    *,
    typed: bool = False,
    include_in_progress: bool = False,
    damaged: list[DamagedFile] | None = None,
) -> Iterator[Any]:
    """Yield the events at `path` as records of schema `version` (default newest).

    Every file is resolved from its own writer schema to the requested one: older files
    get defaults for fields added later, fields a reader does not know are dropped. With
    `typed=True` the events come as `AgentEvent` models instead of dicts. With
    `include_in_progress`, in-progress files are read too, up to their last complete block
    (events not yet flushed are not there); a file that has no complete header is skipped.

    A damaged file (truncated, corrupt, not Avro, unreadable) never stops the reading: its
    events up to the damage are yielded, the rest of it is skipped, every other file is
    still read, and the file is reported — appended to `damaged` when a list is given,
    else as a `DamagedFileWarning`."""
    reader_schema = parsed_schema(LATEST_VERSION if version is None else version)
    for file in event_log_files(path, include_in_progress=include_in_progress):
        count = 0
        try:
            handle = _open_complete(file)
            if handle is None:
                continue
            with handle:
                records = fastavro.reader(handle)
                schema_text = records.metadata["avro.schema"]
                writer_schema = fastavro.parse_schema(json.loads(schema_text))
                if writer_schema != reader_schema:  # resolving costs; skip it when they match
                    handle.seek(0)
                    records = fastavro.reader(handle, reader_schema=reader_schema)
                for record in records:
                    event = from_record(record) if typed else record
                    count += 1
                    yield event
        except Exception as exc:  # any damage: fastavro raises many kinds on bad bytes
            report = DamagedFile(file, _damage(exc), count)
            if damaged is not None:
                damaged.append(report)
            else:
                warnings.warn(str(report), DamagedFileWarning, stacklevel=2)
