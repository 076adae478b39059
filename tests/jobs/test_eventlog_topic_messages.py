"""Events as messages for the event-log topic: a message never exceeds the topic's limit."""

from __future__ import annotations

import json
from pathlib import Path

from streamagents.connectors.media import MediaStore
from streamagents.jobs.eventlog_topic import OFFLOADED_EVENT, EventMessages
from streamagents.serde import avro_single_object
from streamagents.serde.avro import DEFAULT_TEXT_LIMIT
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import MediaRef

LIMIT = 1_000_000


def answer_event(text: str) -> str:
    return AgentEvent.model_validate(
        {
            "event_type": "chat_response",
            "job_id": "job",
            "key": "k-1",
            "run_id": "run-1",
            "sequence": 2,
            "payload": {"messages": [{"role": "assistant", "content": text}], "model": "m"},
        }
    ).model_dump_json()


def test_a_verbose_event_over_the_limit_keeps_bounded_texts_and_a_ref_to_the_whole(
    tmp_path: Path,
) -> None:
    raw = answer_event("long answer " * 120_000)  # 1.4 MB of text
    encode = EventMessages("verbose", str(tmp_path / "media"), LIMIT)
    try:
        row = encode.map(raw)
    finally:
        encode.close()
    assert row[0] == "k-1" and len(row[1]) <= LIMIT
    record = avro_single_object.decode(row[1])
    text = record["payload"]["messages"][0]["content"]
    assert text["truncated"] and len(text["text"]) == DEFAULT_TEXT_LIMIT
    assert text["original_length"] == len("long answer " * 120_000)
    ref = MediaRef.model_validate_json(record["payload"]["attributes"][OFFLOADED_EVENT])
    stored = MediaStore(str(tmp_path / "media")).get(ref)
    assert json.loads(stored) == json.loads(raw)


def test_an_event_within_the_limit_is_encoded_whole_at_its_level(tmp_path: Path) -> None:
    encode = EventMessages("verbose", str(tmp_path / "media"), LIMIT)
    record = avro_single_object.decode(encode.map(answer_event("short " * 1000))[1])
    assert record["payload"]["messages"][0]["content"]["text"] == "short " * 1000
    assert OFFLOADED_EVENT not in record["payload"]["attributes"]
    assert not (tmp_path / "media").exists()
