"""The rules an input line must keep: depth, strict JSON, text, sizes, and its id."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.operators.agent.config import AgentConfig, InputLimits, ModelSpec
from streamagents.operators.agent.emitted_records import dead_letter_record
from streamagents.operators.agent.records import (
    ErrorInfo,
    InputError,
    numbered,
    parse_input,
)


def refusal(raw: str, limits: InputLimits | None = None) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_input(raw, "key", limits)
    return caught.value


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    """An attribute value `depth` levels deep inside a line (the line is level 1)."""
    inner = open_ * (depth - 1) + close * (depth - 1)
    if open_ == "{":
        inner = '{"a":' * (depth - 1) + "1" + "}" * (depth - 1)
    return '{"key": "k", "text": "hi", "deep": ' + inner + "}"


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 1000 + "]" * 1000,
        '{"a":' * 5000 + "1" + "}" * 5000,
        nested(1000),
        nested(65),
        nested(65, "{", "}"),
    ],
)
def test_a_line_nested_deeper_than_the_limit_is_refused_naming_the_rule(raw: str) -> None:
    error = refusal(raw)
    assert error.error_type == "InputTooDeep"
    assert str(error) == "input nests deeper than 64 levels (max_depth)"


def test_a_line_at_the_depth_limit_and_brackets_inside_strings_are_accepted() -> None:
    assert parse_input(nested(64), "key").attributes["deep"]
    assert parse_input(nested(64, "{", "}"), "key").attributes["deep"]
    brackets = json.dumps({"key": "k", "text": "[" * 500 + '\\"{' * 500})
    assert parse_input(brackets, "key").message.content.startswith("[[[")


def test_the_dead_letter_of_a_deeply_nested_line_is_built_without_an_error() -> None:
    raw = '{"id": ' + "[" * 5000 + "]" * 5000 + "}"
    letter = json.loads(dead_letter_record("parse", ErrorInfo(type="X", message="m"), raw))
    assert (letter["input"], letter["id"]) == (raw, None)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999", "-1E400"])
def test_non_finite_numbers_are_refused_as_not_strict_json(constant: str) -> None:
    error = refusal('{"key": "k", "text": "hi", "score": ' + constant + "}")
    assert error.error_type == "InvalidNumber"
    assert "strict JSON" in str(error) and "finite" in str(error)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"key": "k", "text": "a\\ud800b"}', "text"),
        ('{"key": "k", "text": "hi", "meta": {"tags": ["ok", "\\uDC00"]}}', "meta.tags.1"),
        ('{"key": "k", "text": "hi", "m\\ud800": 1}', "a field name"),
    ],
)
def test_a_lone_surrogate_escape_is_refused_naming_the_field(raw: str, field: str) -> None:
    error = refusal(raw)
    assert error.error_type == "InvalidText"
    assert str(error).startswith(field) and "lone surrogate" in str(error)


def test_a_lone_surrogate_character_in_the_line_is_refused() -> None:
    assert refusal('{"key": "k", "text": "a\ud800"}').error_type == "InvalidText"


def test_a_surrogate_pair_escape_is_one_character_and_accepted() -> None:
    assert parse_input('{"key": "k", "text": "\\ud83d\\ude00"}', "key").message.content == "😀"


def test_limits_default_to_64_mib_lines_1024_character_keys_64_kib_attributes() -> None:
    limits = AgentConfig(model=ModelSpec(provider="gemini", model="m")).input_limits
    assert limits == InputLimits()
    assert (limits.max_line_bytes, limits.max_key_chars) == (64 * 1024 * 1024, 1024)
    assert (limits.max_attributes_bytes, limits.max_depth) == (65536, 64)


def test_a_line_over_max_line_bytes_is_refused_with_its_size_not_its_payload() -> None:
    raw = json.dumps({"key": "k", "text": "é" * 600})
    error = refusal(raw, InputLimits(max_line_bytes=1000))
    assert error.error_type == "InputTooLarge"
    assert str(error) == f"input line is {len(raw.encode())} bytes, over max_line_bytes=1000"
    assert parse_input(raw, "key", InputLimits(max_line_bytes=len(raw.encode())))


def test_a_key_over_max_key_chars_is_refused_without_the_key() -> None:
    error = refusal(json.dumps({"key": "K" * 1025, "text": "hi"}))
    assert error.error_type == "InvalidKey"
    assert str(error) == "key field 'key' is 1025 characters, over max_key_chars=1024"
    assert parse_input(json.dumps({"key": "K" * 1024, "text": "hi"}), "key").key == "K" * 1024


def test_attributes_over_max_attributes_bytes_are_refused_but_text_and_media_do_not_count() -> None:
    limits = InputLimits(max_attributes_bytes=100)
    error = refusal(json.dumps({"key": "k", "text": "hi", "note": "n" * 200}), limits)
    assert error.error_type == "InputTooLarge" and "max_attributes_bytes=100" in str(error)
    assert "nnnn" not in str(error)
    assert parse_input(json.dumps({"key": "k", "text": "t" * 500, "a": 1}), "key", limits)


def test_limits_are_validated() -> None:
    for bad in ({"max_line_bytes": 0}, {"max_key_chars": 0}, {"max_depth": 257}):
        with pytest.raises(ValueError):
            InputLimits(**bad)


def test_identical_lines_without_id_get_distinct_ids_by_their_position() -> None:
    raw = json.dumps({"key": "k", "text": "same"})
    digest = hashlib.sha256(raw.encode()).hexdigest()
    record = parse_input(raw, "key")
    assert (record.id, record.id_given) == (digest, False)
    first, second = numbered(record, 0), numbered(parse_input(raw, "key"), 1)
    assert (first.id, second.id) == (f"{digest}-0", f"{digest}-1")
    assert numbered(record, 0) == first, "the same position gives the same id"


def test_a_given_id_is_kept_whatever_the_position() -> None:
    record = parse_input(json.dumps({"id": "m-1", "key": "k", "text": "hi"}), "key")
    assert record.id_given and numbered(record, 7).id == "m-1"


JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON, key=st.sampled_from([None, "k", 5]), text=st.text())
def test_any_json_value_gives_a_record_with_strict_json_fields_or_an_input_error(
    value: object, key: object, text: str
) -> None:
    line = {"value": value, "text": text} if key is None else {"key": key, "value": value}
    for raw in (json.dumps(value), json.dumps({**line, "text": text or "x"})):
        try:
            record = parse_input(raw, "key")
        except InputError as error:
            assert error.error_type and str(error)
            continue
        json.dumps(record.attributes, allow_nan=False).encode("utf-8")
        record.message.model_dump_json()


@settings(max_examples=300, deadline=None)
@given(raw=st.text() | st.text(alphabet='[]{}":,\\ud0123456789eE.-+NaIfinty '))
def test_any_text_line_gives_a_record_or_an_input_error(raw: str) -> None:
    try:
        parse_input(raw, "key", InputLimits(max_depth=4))
    except InputError as error:
        assert error.error_type
