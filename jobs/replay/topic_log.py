"""An event-log topic's messages as an event-log file, so that a replay reads a topic as files.

Each message is decoded from its Avro single-object encoding (any shipped schema version,
resolved to the newest) and written, as it is, to one event-log file. A bounded message
(an event over the topic's `max_record_bytes`, see `streamagents.jobs.eventlog_topic`)
is replaced by the whole event it names in the media store; when the store cannot give
it, the bounded message is written and its run is listed as unreadable, so that a replay
leaves the run out rather than replay it from prefixes. A message that does not decode
(not single-object encoded, an unknown schema fingerprint, truncated) is skipped and
listed as damaged; it never stops the copy.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro

from streamagents.connectors.eventlog import default_codec
from streamagents.connectors.media import MediaStore
from streamagents.jobs.eventlog_topic import OFFLOADED_EVENT
from streamagents.serde import avro_single_object
from streamagents.serde.avro import LATEST_VERSION, LogLevel, parsed_schema, to_record
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import MediaRef
from streamagents.serde.safe_text import clip

__all__ = ["DamagedMessage", "TopicLog", "TopicMessage", "copied_messages", "write_topic_log"]

LOG_FILE = "events-topic.avro"


@dataclass(frozen=True)
class TopicMessage:
    """One message of the topic: where it was and its value (None for a tombstone)."""

    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True)
class DamagedMessage:
    """A message that is not an event-log message, and why."""

    partition: int
    offset: int
    error: str

    def __str__(self) -> str:
        return f"partition {self.partition} offset {self.offset}: {self.error} (skipped)"


@dataclass
class TopicLog:
    """What a copy of the topic holds: counts, the damaged messages and the unreadable runs."""

    path: Path
    """The event-log file written."""
    messages: int = 0
    events: int = 0
    offloaded: int = 0
    """Bounded messages replaced by their whole event from the media store."""
    damaged: list[DamagedMessage] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    """Run id -> why one of its events could be read only as a bounded message."""


def copied_messages(folder: Path) -> Iterator[TopicMessage]:
    """The messages the copy job wrote to `folder` (JSON lines of `partition`, `offset` and
    `value` in base64), one at a time: each partition's in offset order (readers of the log
    order a run's events by their sequence, so partitions may interleave)."""
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.name[0] not in "._"):
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    row = json.loads(line)
                    value = None if row["value"] is None else base64.b64decode(row["value"])
                    yield TopicMessage(row["partition"], row["offset"], value)


def write_topic_log(
    messages: Iterable[TopicMessage], directory: Path, media_root: str | None = None
) -> TopicLog:
    """Write the events of `messages` to one event-log file in `directory`; bounded messages'
    whole events are read from the store at `media_root` (none: those runs are unreadable;
    the store a message's ref names is never opened)."""
    directory.mkdir(parents=True, exist_ok=True)
    log = TopicLog(directory / LOG_FILE)
    stores: dict[str, MediaStore] = {}
    with log.path.open("wb") as handle:
        fastavro.writer(
            handle,
            parsed_schema(LATEST_VERSION),
            _records(messages, log, media_root, stores),
            codec=default_codec(),
        )
    return log


def _records(
    messages: Iterable[TopicMessage],
    log: TopicLog,
    media_root: str | None,
    stores: dict[str, MediaStore],
) -> Iterator[dict[str, Any]]:
    for message in messages:
        log.messages += 1
        try:
            if message.value is None:
                raise ValueError("no value (a tombstone)")
            record = avro_single_object.decode(message.value)
        except Exception as exc:  # hostile bytes: fastavro raises many kinds on them
            log.damaged.append(DamagedMessage(message.partition, message.offset, _error(exc)))
            continue
        ref = record["payload"]["attributes"].get(OFFLOADED_EVENT)
        if ref is not None:
            try:
                record = _whole_event(ref, media_root, stores)
                log.offloaded += 1
            except Exception as exc:  # unreachable, missing or damaged: the run is unreadable
                run_id = record["run_id"]
                if run_id is not None:
                    log.unreadable.setdefault(
                        run_id,
                        f"its {record['event_type']} event (sequence {record['sequence']}) was "
                        f"over the topic's message limit and stored whole in the media store, "
                        f"which could not give it ({_error(exc)})",
                    )
        log.events += 1
        yield record


def _whole_event(
    ref_json: str, media_root: str | None, stores: dict[str, MediaStore]
) -> dict[str, Any]:
    """The record of the whole event stored under a bounded message's ref."""
    ref = MediaRef.model_validate_json(ref_json)
    root = media_root  # never the store the ref names: a topic's message is not trusted
    if root is None:
        raise LookupError("no media store was given to read it from; name it with --media")
    if root not in stores:
        stores[root] = MediaStore(root, verify_existing="size")
    event = AgentEvent.model_validate_json(stores[root].get(ref))
    return to_record(event, version=LATEST_VERSION, level=LogLevel.VERBOSE)


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return clip(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, 300)
