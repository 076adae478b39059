"""The call journal: completed model and tool calls, kept outside Flink state.

A call's result is recorded under an id the engine derives from the run's state alone
(`JournalEntry.call_id`), with a hash of its request (`request_hash`). Before a call is
made again (after a restore, a source replay or a rerun of the job) its id is looked up;
an entry answers the call only when its request hash matches (`CallJournal.answer`).

Two implementations of the `CallJournal` port: `InMemoryCallJournal` (tests, and the
engine's property tests) and `FileCallJournal`, segment files beside the media store over
any `pyarrow.fs` filesystem (local, `s3://`, `gs://`).

The file format is JSON lines, one entry a line, each line carrying a CRC-32 of its entry
text. JSON lines rather than Avro: the entries are already JSON (pydantic models of the
serde layer), a person can read a segment with standard tools, and a torn write leaves a
last line without its newline that the reader recognises and skips; the checksum catches
a line damaged otherwise. A damaged line is a warning and is skipped, never an error: the
call it held is made again.

Each writer (one per subtask attempt) appends to its own segment,
`<root>/journal/<job hash>/<opened_ms>-<writer>-<n>.jsonl`, and starts a new one at `roll`; `prune`
deletes segments last written before a given time. A new writer reads every segment of
the job on its first look-up, so a restore at another parallelism finds its keys' calls.
On object stores (S3, GCS) a segment is visible once it is rolled (closed); on a local
filesystem each entry is visible once written.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from typing import Any, Literal, Protocol

import pyarrow.fs as pafs
from pydantic import BaseModel, ConfigDict, ValidationError

from streamagents.connectors.media import _open_filesystem

__all__ = [
    "CallJournal",
    "FileCallJournal",
    "InMemoryCallJournal",
    "JournalEntry",
    "answer",
    "request_hash",
]

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".jsonl"


def request_hash(*parts: str) -> str:
    """The hash of a call's request, from its parts as text (model, messages, arguments)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class JournalEntry(BaseModel):
    """A completed call: its id, its request's hash, and its result as JSON text."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    request_hash: str
    kind: Literal["model", "tool"]
    result: str
    """The model's `ChatResponse` or the tool's result `ChatMessage`, as JSON; media are
    media-store refs (results are offloaded before they are recorded)."""
    recorded_ms: int


class CallJournal(Protocol):
    """Where completed calls are kept, and looked up before a call is made."""

    def look_up(self, call_id: str) -> JournalEntry | None:
        """The entry recorded under `call_id`, if any (the caller checks its request hash)."""
        ...

    def record(self, entry: JournalEntry) -> None:
        """Keep a completed call's entry."""
        ...

    def roll(self) -> None:
        """Close the current segment; the next entry starts a new one."""
        ...

    def prune(self, before_ms: int) -> int:
        """Drop the segments last written before `before_ms`; returns how many."""
        ...


def answer(journal: CallJournal, call_id: str, hashed: str) -> JournalEntry | None:
    """The entry that answers the call `call_id` with request hash `hashed`, if any; an
    entry under the same id for a different request answers nothing (a warning)."""
    entry = journal.look_up(call_id)
    if entry is None:
        return None
    if entry.request_hash != hashed:
        log.warning("call journal: entry %s is for a different request; calling again", call_id)
        return None
    return entry


class InMemoryCallJournal:
    """A `CallJournal` in a dict: entries live as long as the object; segments are the
    entries recorded between two rolls."""

    def __init__(self) -> None:
        self._segments: list[tuple[int, dict[str, JournalEntry]]] = [(0, {})]

    @property
    def entries(self) -> dict[str, JournalEntry]:
        """Every entry kept, by call id (the newest wins)."""
        merged: dict[str, JournalEntry] = {}
        for _, segment in self._segments:
            merged.update(segment)
        return merged

    def look_up(self, call_id: str) -> JournalEntry | None:
        return self.entries.get(call_id)

    def record(self, entry: JournalEntry) -> None:
        _, segment = self._segments[-1]
        self._segments[-1] = (entry.recorded_ms, {**segment, entry.call_id: entry})

    def roll(self) -> None:
        self._segments.append((0, {}))

    def prune(self, before_ms: int) -> int:
        old = [s for s in self._segments[:-1] if s[0] < before_ms]
        self._segments = [s for s in self._segments if s not in old]
        return len(old)


def encode_line(entry: JournalEntry) -> bytes:
    """An entry as a segment line: `<crc32 hex> <entry json>\\n`."""
    text = entry.model_dump_json().encode()
    return b"%08x %s\n" % (zlib.crc32(text), text)


def decode_lines(data: bytes, segment: str) -> list[JournalEntry]:
    """The intact entries of a segment's bytes; a damaged or torn line is skipped with a
    warning naming the segment and line."""
    entries = []
    lines = data.split(b"\n")
    torn = lines.pop()  # the bytes after the last newline: empty unless a write was torn
    if torn:
        log.warning("call journal: %s ends in a torn entry; skipped", segment)
    for number, line in enumerate(lines, 1):
        try:
            checksum, text = line.split(b" ", 1)
            if int(checksum, 16) != zlib.crc32(text):
                raise ValueError("checksum mismatch")
            entries.append(JournalEntry.model_validate_json(text))
        except (ValueError, ValidationError) as error:
            reason = type(error).__name__
            log.warning(
                "call journal: %s line %d is damaged (%s); skipped", segment, number, reason
            )
    return entries


class FileCallJournal:
    """A `CallJournal` of segment files under `<root>/journal/<job>/` on a pyarrow filesystem.

    `root` is the media store's root (a local path or a URI); `clock_ms` dates segments."""

    def __init__(self, root: str, job_id: str, clock_ms: Callable[[], int] | None = None) -> None:
        self._fs, base, _ = _open_filesystem(root)
        safe_job = hashlib.sha256(job_id.encode()).hexdigest()[:16]
        self._dir = f"{base.rstrip('/')}/journal/{safe_job}"
        self._writer = uuid.uuid4().hex[:12]
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()
        self._index: dict[str, tuple[str, JournalEntry]] | None = None
        """Every entry kept, by call id, with the segment that holds it."""
        self._stream: Any = None
        self._segment: str | None = None
        self._rolls = 0

    @property
    def directory(self) -> str:
        """Where this job's segments are, inside the filesystem."""
        return self._dir

    def look_up(self, call_id: str) -> JournalEntry | None:
        with self._lock:
            found = self._loaded().get(call_id)
            return None if found is None else found[1]

    def record(self, entry: JournalEntry) -> None:
        line = encode_line(entry)
        with self._lock:
            segment = self._segment
            if self._stream is None or segment is None:
                self._fs.create_dir(self._dir, recursive=True)
                self._rolls += 1
                name = f"{self._clock_ms():013d}-{self._writer}-{self._rolls:06d}"
                segment = f"{self._dir}/{name}{SEGMENT_SUFFIX}"
                self._stream = self._fs.open_output_stream(segment)
                self._segment = segment
            self._stream.write(line)
            self._stream.flush()
            self._loaded()[entry.call_id] = (segment, entry)

    def roll(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.close()
            self._stream = None
            self._segment = None

    def prune(self, before_ms: int) -> int:
        with self._lock:
            dropped = set()
            for info in self._segments():
                if info.path == self._segment or info.mtime_ns is None:
                    continue
                if info.mtime_ns // 1_000_000 < before_ms:
                    self._fs.delete_file(info.path)
                    dropped.add(info.path)
            if self._index is not None and dropped:
                kept = {k: v for k, v in self._index.items() if v[0] not in dropped}
                self._index = kept
            return len(dropped)

    def close(self) -> None:
        """Close the current segment."""
        self.roll()

    def _segments(self) -> list[pafs.FileInfo]:
        """The job's segment files."""
        selector = pafs.FileSelector(self._dir, allow_not_found=True)
        infos = self._fs.get_file_info(selector)
        return [
            i for i in infos if i.type == pafs.FileType.File and i.path.endswith(SEGMENT_SUFFIX)
        ]

    def _loaded(self) -> dict[str, tuple[str, JournalEntry]]:
        """The index of every segment's entries, read on first use (the lock is held)."""
        if self._index is None:
            index: dict[str, tuple[str, JournalEntry]] = {}
            for info in sorted(self._segments(), key=lambda i: i.base_name):
                try:
                    with self._fs.open_input_stream(info.path) as stream:
                        data = stream.read()
                except OSError as error:
                    log.warning("call journal: %s is unreadable (%s); skipped", info.path, error)
                    continue
                for entry in decode_lines(data, info.path):
                    index[entry.call_id] = (info.path, entry)
            self._index = index
        return self._index
