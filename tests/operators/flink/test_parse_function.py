"""The parse step: large inline media go to the store before an input can wait in keyed state."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.records import parse_input
from streamagents.operators.flink.parse_records import ParseRecords
from streamagents.operators.flink.side_outputs import DEAD_LETTERS_TAG
from streamagents.serde.messages import MediaRef

BIG = b"\x89PNG\r\n\x1a\n" + hashlib.sha256(b"parse").digest() * 2048  # ~64 KiB
SMALL = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100


def image(data: bytes) -> dict[str, Any]:
    """An inline image part as an input line gives it."""
    return {"kind": "image", "mime_type": "image/png", "data": base64.b64encode(data).decode()}


@pytest.fixture()
def parse(tmp_path: Path) -> Iterator[ParseRecords]:
    """An opened parse function whose media store is under `tmp_path`."""
    yield from opened(tmp_path / "media")


def opened(store: Path) -> Iterator[ParseRecords]:
    """A parse function opened on the media store `store` (threshold 1 KiB), closed after."""
    config = AgentConfig(
        model=ModelSpec(provider="gemini", model="m"),
        media_store=str(store),
        offload_threshold_bytes=1024,
    )
    function = ParseRecords(config, "inputs")
    function.open(None)
    yield function
    function.close()


def test_large_inline_media_becomes_a_ref_and_the_line_keeps_its_id_and_fields(
    parse: ParseRecords, tmp_path: Path
) -> None:
    raw = json.dumps(
        {
            "key": "k",
            "text": "compare",
            "parts": [{**image(BIG), "metadata": {"camera": "front"}}, image(SMALL)],
            "lang": "en",
        }
    )
    [(key, line)] = list(parse.process_element(raw, None))
    digest = hashlib.sha256(BIG).hexdigest()
    assert key == "k"
    assert digest in line and base64.b64encode(BIG)[:400].decode() not in line
    given, normalized = parse_input(raw, "key"), parse_input(line, "key")
    assert normalized.id == given.id == hashlib.sha256(raw.encode()).hexdigest()
    assert normalized.attributes == given.attributes == {"lang": "en"}
    big, small = normalized.message.media
    assert big.ref is not None and big.ref.sha256 == digest and big.metadata == {"camera": "front"}
    assert small.data == SMALL
    assert (tmp_path / "media" / "sha256" / digest[:2] / digest).read_bytes() == BIG


def test_a_line_without_large_media_goes_on_unchanged(parse: ParseRecords) -> None:
    for raw in (
        json.dumps({"key": "k", "text": "hi"}),
        json.dumps({"key": "k", "parts": [image(SMALL)]}),
    ):
        assert list(parse.process_element(raw, None)) == [("k", raw)]


def test_media_the_store_cannot_take_go_to_dead_letters_with_the_reason(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("a file where the store's folder should be")
    raw = json.dumps({"id": "m1", "key": "k", "parts": [image(BIG)]})
    for parse in opened(not_a_folder):
        [(tag, letter)] = list(parse.process_element(raw, None))
        record = json.loads(letter)
        assert tag is DEAD_LETTERS_TAG
        assert (record["stage"], record["error_type"]) == ("parse", "MediaStoreError")
        assert (record["key"], record["id"], record["input"]) == ("k", "m1", raw)
        assert record["reason"] and base64.b64encode(BIG)[:100].decode() not in record["reason"]


HOSTILE = {
    "[" * 1000 + "]" * 1000: ("InputTooDeep", "nests deeper than 64 levels"),
    '{"key": "k", "text": "hi", "deep": ' + "[" * 1000 + "]" * 1000 + "}": (
        "InputTooDeep",
        "nests deeper than 64 levels",
    ),
    '{"id": ' + '{"a":' * 3000 + "1" + "}" * 3000 + "}": ("InputTooDeep", "nests deeper"),
    '{"key": "k", "text": "hi", "score": NaN}': ("InvalidNumber", "strict JSON"),
    '{"key": "k", "text": "hi", "score": -Infinity}': ("InvalidNumber", "strict JSON"),
    '{"key": "k", "text": "a\\ud800"}': ("InvalidText", "text holds a lone surrogate"),
    json.dumps({"key": "K" * 5000, "text": "hi"}): ("InvalidKey", "over max_key_chars=1024"),
}


@pytest.mark.parametrize("raw", list(HOSTILE))
def test_a_hostile_line_gives_one_dead_letter_naming_the_rule_never_an_exception(
    parse: ParseRecords, raw: str
) -> None:
    [(tag, letter)] = list(parse.process_element(raw, None))
    record = json.loads(letter)
    error_type, rule = HOSTILE[raw]
    assert tag is DEAD_LETTERS_TAG
    assert (record["stage"], record["error_type"], record["input"]) == ("parse", error_type, raw)
    assert rule in record["reason"] and "KKKK" not in record["reason"]


def test_a_line_over_max_line_bytes_gives_a_dead_letter_with_its_size(tmp_path: Path) -> None:
    config = AgentConfig(
        model=ModelSpec(provider="gemini", model="m"),
        media_store=str(tmp_path / "media"),
        input_limits={"max_line_bytes": 2048},
    )
    parse = ParseRecords(config, "inputs")
    parse.open(None)
    raw = json.dumps({"key": "k", "parts": [image(SMALL * 20)]})
    [(_, letter)] = list(parse.process_element(raw, None))
    parse.close()
    record = json.loads(letter)
    assert record["error_type"] == "InputTooLarge"
    assert record["reason"] == f"input line is {len(raw)} bytes, over max_line_bytes=2048"


def test_an_id_less_line_with_large_media_carries_its_digest_not_an_id(
    parse: ParseRecords,
) -> None:
    raw = json.dumps({"key": "k", "parts": [image(BIG)]})
    [(_, line)] = list(parse.process_element(raw, None))
    assert "id" not in json.loads(line)
    record = parse_input(line, "key")
    assert (record.id, record.id_given) == (hashlib.sha256(raw.encode()).hexdigest(), False)
    assert record.attributes == {}


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.text() | st.text(alphabet='[]{}":,\\ud0123456789eE.-+NaIfinty key'))
def test_any_text_line_gives_one_keyed_line_or_one_dead_letter(
    parse: ParseRecords, raw: str
) -> None:
    emitted = list(parse.process_element(raw, None))
    assert len(emitted) == 1
    if emitted[0][0] is DEAD_LETTERS_TAG:
        assert json.loads(emitted[0][1])["input"] == raw


def test_kafka_bytes_that_are_utf8_parse_as_the_same_line(parse: ParseRecords) -> None:
    raw = json.dumps({"key": "k", "id": "u-1", "text": "grüß dich"}, ensure_ascii=False)
    assert list(parse.process_element(raw.encode(), None)) == [("k", raw)]


def test_kafka_bytes_that_are_not_utf8_dead_letter_with_a_ref_to_the_exact_bytes(
    parse: ParseRecords, tmp_path: Path
) -> None:
    raw = b'{"key": "k", "id": "b-1", "text": "caf\xe9"}'
    [(tag, letter_json)] = list(parse.process_element(raw, None))
    letter = json.loads(letter_json)
    assert tag is DEAD_LETTERS_TAG
    assert letter["error_type"] == "InvalidText" and letter["id"] == "b-1"
    assert letter["reason"].startswith("input is not valid UTF-8 text")
    assert f"at offset {raw.index(0xE9)}" in letter["reason"]
    assert letter["input"] == raw.decode("utf-8", "replace")
    ref = MediaRef.model_validate(letter["offloaded"]["input"])
    assert ref.mime_type == "application/octet-stream"
    assert MediaStore(str(tmp_path / "media")).get(ref) == raw
