"""Records kept within a sink's limit: what does not fit goes to the media store, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamagents.connectors.media import MediaStore
from streamagents.connectors.record_offload import (
    MIN_MAX_RECORD_BYTES,
    PREFIX_CHARS,
    RecordOffload,
    utf8_size,
)
from streamagents.serde.messages import MediaRef

LIMIT = MIN_MAX_RECORD_BYTES


def read_back(store: MediaStore, ref: dict[str, Any]) -> bytes:
    return store.get(MediaRef.model_validate(ref))


@pytest.fixture
def store(tmp_path: Path) -> MediaStore:
    return MediaStore(str(tmp_path / "media"))


def test_a_record_that_fits_is_written_byte_for_byte(store: MediaStore) -> None:
    record = json.dumps({"stage": "parse", "input": "é" * 1000}, ensure_ascii=False)
    assert RecordOffload(store, LIMIT).json_record(record) is record


def test_a_large_dead_letter_keeps_a_prefix_and_a_ref_to_the_exact_input(
    store: MediaStore,
) -> None:
    line = "not json " + "ü" * 2_000_000
    letter = {"stage": "parse", "error_type": "InvalidJson", "reason": "input is not valid JSON"}
    letter |= {"key": None, "id": None, "input": line}
    bounded = json.loads(RecordOffload(store).json_record(json.dumps(letter, ensure_ascii=False)))
    assert {k: bounded[k] for k in ("stage", "error_type", "reason", "key", "id")} == {
        k: letter[k] for k in ("stage", "error_type", "reason", "key", "id")
    }
    assert bounded["input"] == line[:PREFIX_CHARS]
    ref = bounded["offloaded"]["input"]
    assert ref["size_bytes"] == len(line.encode()) and ref["mime_type"].startswith("text/plain")
    assert read_back(store, ref) == line.encode()


def test_an_offload_repeated_after_a_restore_gives_the_same_record_and_one_object(
    store: MediaStore, tmp_path: Path
) -> None:
    record = json.dumps({"id": "a", "text": "x" * 200_000})
    offload = RecordOffload(store, LIMIT)
    assert offload.json_record(record) == offload.json_record(record)
    assert len([path for path in (tmp_path / "media").rglob("*") if path.is_file()]) == 1


def test_a_record_of_many_large_lists_is_stored_whole_and_keeps_its_scalars(
    store: MediaStore,
) -> None:
    record = {"id": "r-1", "status": "ok", "parts": [{"kind": "text", "text": "y"}] * 20_000}
    bounded = json.loads(RecordOffload(store, LIMIT).json_record(json.dumps(record)))
    assert {k: bounded[k] for k in ("id", "status")} == {"id": "r-1", "status": "ok"}
    assert "parts" not in bounded
    assert json.loads(read_back(store, bounded["offloaded"]["record"])) == record


def test_a_value_that_is_not_a_json_object_is_stored_whole(store: MediaStore) -> None:
    bounded = json.loads(RecordOffload(store, LIMIT).json_record("[" + "1," * 60_000 + "1]"))
    assert list(bounded) == ["offloaded"]
    assert read_back(store, bounded["offloaded"]["record"]).startswith(b"[1,1,")


def test_a_limit_below_the_minimum_is_refused(store: MediaStore) -> None:
    with pytest.raises(ValueError, match="at least 65536"):
        RecordOffload(store, 1000)


TEXT = st.text(st.characters(codec="utf-8"), max_size=40).map(lambda t: t * 1000)
VALUES = st.one_of(TEXT, st.integers(), st.none(), st.lists(st.integers(), max_size=3))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(min_size=1, max_size=8), VALUES, max_size=8))
def test_every_bounded_record_fits_and_its_refs_read_back_the_whole_values(
    tmp_path_factory: pytest.TempPathFactory, record: dict[str, Any]
) -> None:
    store = MediaStore(str(tmp_path_factory.mktemp("media")))
    text = json.dumps(record, ensure_ascii=False)
    bounded_text = RecordOffload(store, LIMIT).json_record(text)
    assert utf8_size(bounded_text) <= LIMIT
    bounded = json.loads(bounded_text)
    if bounded_text == text:
        return
    offloaded = bounded.pop("offloaded")
    if "record" in offloaded:
        assert json.loads(read_back(store, offloaded.pop("record"))) == record
    for name, ref in offloaded.items():
        assert read_back(store, ref) == record[name].encode()
        assert bounded[name] == record[name][:PREFIX_CHARS]
    for name, value in bounded.items():
        if name not in offloaded:
            assert value == record[name]
