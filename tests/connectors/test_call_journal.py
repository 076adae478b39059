"""The call journal: look-up, record, roll and prune on both implementations; damaged
segments are skipped with a warning, never an error."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from streamagents.connectors.call_journal import (
    CallJournal,
    FileCallJournal,
    InMemoryCallJournal,
    JournalEntry,
    answer,
    request_hash,
)


def entry(call_id: str, result: str = '{"ok":true}', at_ms: int = 1000) -> JournalEntry:
    return JournalEntry(
        call_id=call_id,
        request_hash=request_hash("req", call_id),
        kind="tool",
        result=result,
        recorded_ms=at_ms,
    )


@pytest.fixture(params=["memory", "file"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> CallJournal:
    if request.param == "memory":
        return InMemoryCallJournal()
    return FileCallJournal(str(tmp_path), "job-a")


def segments(root: Path) -> list[Path]:
    return sorted(root.rglob("*.jsonl"))


def test_a_recorded_call_is_found_by_its_id(journal: CallJournal) -> None:
    assert journal.look_up("c1") is None
    journal.record(entry("c1"))
    journal.record(entry("c2", result='{"n":2}'))
    assert journal.look_up("c1") == entry("c1")
    assert journal.look_up("c2") == entry("c2", result='{"n":2}')


def test_an_entry_answers_only_its_own_request(
    journal: CallJournal, caplog: pytest.LogCaptureFixture
) -> None:
    journal.record(entry("c1"))
    assert answer(journal, "c1", request_hash("req", "c1")) == entry("c1")
    with caplog.at_level(logging.WARNING):
        assert answer(journal, "c1", request_hash("another request")) is None
    assert "different request" in caplog.text
    assert answer(journal, "unknown", request_hash("req", "unknown")) is None


def test_entries_survive_a_roll(journal: CallJournal) -> None:
    journal.record(entry("c1"))
    journal.roll()
    journal.record(entry("c2"))
    assert journal.look_up("c1") is not None and journal.look_up("c2") is not None


def test_a_new_writer_reads_every_segment_of_its_job(tmp_path: Path) -> None:
    first = FileCallJournal(str(tmp_path), "job-a")
    first.record(entry("c1"))
    first.roll()
    first.record(entry("c2"))
    first.close()
    other_writer = FileCallJournal(str(tmp_path), "job-a")
    assert other_writer.look_up("c1") == entry("c1")
    assert other_writer.look_up("c2") == entry("c2")
    assert len(segments(tmp_path)) == 2
    assert FileCallJournal(str(tmp_path), "job-b").look_up("c1") is None


def test_an_entry_is_readable_before_its_segment_is_rolled_on_a_local_disk(
    tmp_path: Path,
) -> None:
    writer = FileCallJournal(str(tmp_path), "job-a")
    writer.record(entry("c1"))  # the writer is killed here: no roll, no close
    assert FileCallJournal(str(tmp_path), "job-a").look_up("c1") == entry("c1")


def test_a_uri_root_works(tmp_path: Path) -> None:
    FileCallJournal(f"file://{tmp_path}", "job-a").record(entry("c1"))
    assert FileCallJournal(str(tmp_path), "job-a").look_up("c1") == entry("c1")


def test_a_torn_tail_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = FileCallJournal(str(tmp_path), "job-a")
    writer.record(entry("c1"))
    writer.record(entry("c2"))
    writer.close()
    [segment] = segments(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 20])  # the second entry's write was cut short
    with caplog.at_level(logging.WARNING):
        reader = FileCallJournal(str(tmp_path), "job-a")
        assert reader.look_up("c1") == entry("c1")
        assert reader.look_up("c2") is None
    assert "torn entry" in caplog.text


def test_a_damaged_line_is_skipped_and_the_others_are_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = FileCallJournal(str(tmp_path), "job-a")
    for name in ("c1", "c2", "c3"):
        writer.record(entry(name, result='{"value":"' + name * 10 + '"}'))
    writer.close()
    [segment] = segments(tmp_path)
    lines = segment.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"c2c2", b"X2c2", 1)  # a flipped byte: the checksum fails
    segment.write_bytes(b"\n".join(lines))
    with caplog.at_level(logging.WARNING):
        reader = FileCallJournal(str(tmp_path), "job-a")
        assert reader.look_up("c2") is None
        assert reader.look_up("c1") is not None and reader.look_up("c3") is not None
    assert "line 2 is damaged" in caplog.text


@pytest.mark.parametrize(
    "garbage",
    [b"\x00\xff\xfe binary\n", b"not a checksum {}\n", b"00000000 {}\n", b"\n", os.urandom(300)],
)
def test_hostile_segment_bytes_never_raise(
    tmp_path: Path, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    writer = FileCallJournal(str(tmp_path), "job-a")
    writer.record(entry("c1"))
    writer.close()
    [segment] = segments(tmp_path)
    (segment.parent / "hostile.jsonl").write_bytes(garbage)
    with caplog.at_level(logging.WARNING):
        assert FileCallJournal(str(tmp_path), "job-a").look_up("c1") == entry("c1")
    assert "call journal" in caplog.text


def test_prune_drops_old_rolled_segments_only(tmp_path: Path) -> None:
    writer = FileCallJournal(str(tmp_path), "job-a")
    writer.record(entry("old"))
    writer.roll()
    [old] = segments(tmp_path)
    os.utime(old, (1, 1))  # last written at the epoch
    writer.record(entry("current"))  # the open segment is never pruned
    [current] = [s for s in segments(tmp_path) if s != old]
    os.utime(current, (1, 1))
    assert writer.prune(before_ms=10_000) == 1
    assert segments(tmp_path) == [current]
    assert writer.look_up("old") is None  # its writer forgets it too: memory stays bounded
    assert writer.look_up("current") is not None
    assert FileCallJournal(str(tmp_path), "job-a").look_up("old") is None


def test_in_memory_prune_keeps_the_open_segment() -> None:
    journal = InMemoryCallJournal()
    journal.record(entry("old", at_ms=100))
    journal.roll()
    journal.record(entry("new", at_ms=100))
    assert journal.prune(before_ms=500) == 1
    assert journal.look_up("old") is None
    assert journal.look_up("new") is not None
