"""An event-log topic's messages as a replay's event log, without a broker: the messages are
made by the topic's own encoder (`EventMessages`) from a recording on the engine harness.
(The topic read by `streamagents replay` on the real broker: tests/kafka/test_replay_topic.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from engine_harness import EngineHarness
from replay_runs import outcomes, record, replay

from streamagents.jobs.eventlog_topic import EventMessages
from streamagents.jobs.replay.lines import choose, recorded_runs, replay_lines
from streamagents.jobs.replay.topic_log import TopicLog, TopicMessage, write_topic_log
from streamagents.serde import avro_single_object
from streamagents.testing import EchoTestModel

LIMIT = 65536
LONG_TEXT = "Please read all of this. " + "w" * 70_000
LINES = [
    ("A", json.dumps({"id": "a-1", "key": "A", "text": "tool:lookup O-1"})),
    ("B", json.dumps({"id": "b-1", "key": "B", "text": LONG_TEXT})),
    ("A", json.dumps({"id": "a-2", "key": "A", "text": "bye"})),
]


def _messages(recorded: EngineHarness, media: Path) -> list[TopicMessage]:
    """The recording's events as the event-log topic holds them (verbose, 64 KiB messages),
    one partition, then four messages that are not event-log messages."""
    encode = EventMessages("verbose", str(media), LIMIT)
    try:
        values = [encode.map(line)[1] for c, line in recorded.emitted if c == "events"]
    finally:
        encode.close()
    good = values[0]
    values += [
        b"not avro at all",  # no C3 01 marker
        avro_single_object.MARKER + b"\x00" * 8 + good[10:],  # unknown fingerprint
        good[: len(good) // 2],  # truncated
        None,  # a tombstone
    ]
    return [TopicMessage(0, offset, value) for offset, value in enumerate(values)]


def _copy(tmp_path: Path) -> tuple[EngineHarness, TopicLog]:
    recorded = record(tmp_path, EchoTestModel(), LINES)
    messages = _messages(recorded, tmp_path / "topic-media")
    return recorded, write_topic_log(messages, tmp_path / "recorded", str(tmp_path / "topic-media"))


def test_a_topic_copy_replays_with_zero_differences_and_the_offloaded_input_whole(
    tmp_path: Path,
) -> None:
    recorded, copied = _copy(tmp_path)
    assert copied.offloaded >= 1 and copied.unreadable == {}
    assert copied.events == copied.messages - 4
    replayed, lines, left_out = replay(tmp_path, copied.path.parent, EchoTestModel())
    assert left_out == [] and len(lines) == len(LINES)
    assert outcomes(replayed) == outcomes(recorded)  # zero differences
    [long_line] = [json.loads(x) for x in lines if json.loads(x)["id"] == "b-1"]
    assert long_line["text"] == LONG_TEXT  # the whole input, not the message's prefix
    runs = recorded_runs([copied.path])  # the filters read the copy as they read files
    assert [r.input_id for r in choose(runs, keys={"A"})] == ["a-1", "a-2"]
    assert [r.input_id for r in choose(runs, since_ms=runs[1].timestamp_ms)] == ["b-1", "a-2"]


def test_messages_that_are_not_event_log_messages_are_counted_and_skipped(
    tmp_path: Path,
) -> None:
    _, copied = _copy(tmp_path)
    offsets = [d.offset for d in copied.damaged]
    assert offsets == list(range(copied.messages - 4, copied.messages))
    errors = [d.error for d in copied.damaged]
    assert "no C3 01 marker" in errors[0]
    assert "not one of the shipped event-log versions" in errors[1]
    assert "tombstone" in errors[3]
    assert str(copied.damaged[0]).startswith(f"partition 0 offset {offsets[0]}: ")


def test_a_run_whose_offloaded_event_the_store_cannot_give_is_not_replayed(
    tmp_path: Path,
) -> None:
    recorded = record(tmp_path, EchoTestModel(), LINES)
    messages = _messages(recorded, tmp_path / "topic-media")
    shutil.rmtree(tmp_path / "topic-media")  # the store is gone
    copied = write_topic_log(messages, tmp_path / "recorded")
    long_run = next(o["run_id"] for o in recorded.outputs() if o["id"] == "b-1")
    assert list(copied.unreadable) == [long_run]
    assert "stored whole in the media store" in copied.unreadable[long_run]
    runs = recorded_runs([copied.path])
    lines, left_out = replay_lines(runs, None, copied.unreadable)
    assert [entry.input_id for entry in left_out] == ["b-1"]
    assert "could not give it" in left_out[0].reason
    assert sorted(json.loads(x)["id"] for x in lines) == ["a-1", "a-2"]
