"""Schema evolution rules: shipped versions stay compatible; each breaking change is caught."""

from __future__ import annotations

import copy
import io
import itertools
import json
from typing import Any

import fastavro
import pytest

from streamagents.serde.avro import (
    LATEST_VERSION,
    SCHEMA_VERSIONS,
    LogLevel,
    check_compatible,
    from_record,
    parsed_schema,
    schema_json,
    to_record,
)
from streamagents.serde.events import new_event


def _base() -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Event",
        "namespace": "test",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "count", "type": "long", "default": 0},
            {"name": "note", "type": "string", "default": ""},
            {
                "name": "kind",
                "type": {"type": "enum", "name": "Kind", "symbols": ["a", "b"]},
            },
        ],
    }


def _changed(edit: Any) -> dict[str, Any]:
    schema = copy.deepcopy(_base())
    edit(schema["fields"])
    return schema


@pytest.mark.parametrize("old,new", list(itertools.pairwise(SCHEMA_VERSIONS)))
def test_each_consecutive_pair_of_shipped_versions_is_compatible(old: int, new: int) -> None:
    assert check_compatible(schema_json(old), schema_json(new)) == []


def test_there_are_several_shipped_versions_and_the_newest_is_the_default() -> None:
    assert len(SCHEMA_VERSIONS) >= 2
    assert max(SCHEMA_VERSIONS) == LATEST_VERSION


def test_additive_changes_are_compatible() -> None:
    def additive(fields: list[dict[str, Any]]) -> None:
        fields.append({"name": "extra", "type": ["null", "string"], "default": None})
        fields[2]["type"] = ["string", "null"]  # union widening
        fields[2]["aliases"] = ["old_note"]

    assert check_compatible(_base(), _changed(additive)) == []


def test_removed_field_without_alias_is_caught() -> None:
    problems = check_compatible(_base(), _changed(lambda f: f.pop(2)))
    assert problems == ["Event.note: field removed or renamed without an alias"]


def test_renamed_field_with_an_alias_is_accepted() -> None:
    def rename(fields: list[dict[str, Any]]) -> None:
        fields[2].update(name="remark", aliases=["note"])

    assert check_compatible(_base(), _changed(rename)) == []


def test_added_field_without_default_is_caught() -> None:
    problems = check_compatible(
        _base(), _changed(lambda f: f.append({"name": "size", "type": "long"}))
    )
    assert problems == ["Event.size: field added without a default"]


def test_type_change_other_than_union_widening_is_caught() -> None:
    def retype(fields: list[dict[str, Any]]) -> None:
        fields[1]["type"] = "string"

    problems = check_compatible(_base(), _changed(retype))
    assert problems == ["Event.count: type changed from long to string"]


def test_union_narrowing_is_caught() -> None:
    wide = _changed(lambda f: f[2].update(type=["null", "string"], default=None))
    problems = check_compatible(wide, _base())
    assert problems == ["Event.note: union [null, string] narrowed to string"]


def test_enum_symbol_added_without_enum_default_is_caught() -> None:
    def add_symbol(fields: list[dict[str, Any]]) -> None:
        fields[3]["type"]["symbols"].append("c")

    problems = check_compatible(_base(), _changed(add_symbol))
    assert problems == [
        "Event.kind: enum Kind gained symbols ['c'] but has no default for older readers "
        "to fall back on"
    ]


def test_enum_symbol_added_with_an_enum_default_is_accepted() -> None:
    def with_default(fields: list[dict[str, Any]]) -> None:
        fields[3]["type"]["default"] = "a"

    old = _changed(with_default)
    new = copy.deepcopy(old)
    new["fields"][3]["type"]["symbols"].append("c")
    assert check_compatible(old, new) == []


def test_a_breaking_change_deep_in_the_shipped_schema_is_caught() -> None:
    new = schema_json(LATEST_VERSION)
    payload = next(f for f in new["fields"] if f["name"] == "payload")["type"]
    usage = next(f for f in payload["fields"] if f["name"] == "usage")["type"][1]
    usage["fields"][0]["type"] = "int"
    problems = check_compatible(schema_json(LATEST_VERSION), new)
    assert problems == ["AgentEvent.payload.usage.input_tokens: type changed from long to int"]


def test_log_level_names_are_checked() -> None:
    assert LogLevel.parse("VERBOSE") is LogLevel.VERBOSE
    with pytest.raises(ValueError, match="off, standard, verbose"):
        LogLevel.parse("loud")


@pytest.mark.parametrize(
    "event_type", ["approval_requested", "approval_decided", "approval_expired"]
)
def test_approval_events_are_written_from_v5_and_read_as_unknown_by_a_v4_reader(
    event_type: str,
) -> None:
    event = new_event(
        event_type,
        job_id="j",
        key="k",
        run_id="r",
        sequence=3,
        attributes={"call_id": "call-0", "by": "ana"},
    )
    buffer = io.BytesIO()
    fastavro.writer(buffer, parsed_schema(5), [to_record(event, version=5)])
    buffer.seek(0)
    [record] = list(fastavro.reader(buffer))
    assert from_record(record).event_type.value == event_type
    buffer.seek(0)
    [old] = list(fastavro.reader(buffer, reader_schema=parsed_schema(4)))
    assert old["event_type"] == "unknown"
    assert old["payload"]["attributes"]["call_id"] == "call-0"
    assert to_record(event, version=4)["event_type"] == "unknown"


@pytest.mark.parametrize(
    "event_type", ["followup_scheduled", "followup_fired", "followup_cancelled"]
)
def test_followup_events_are_written_from_v6_and_read_as_unknown_by_a_v5_reader(
    event_type: str,
) -> None:
    event = new_event(
        event_type, job_id="j", key="k", run_id="r", sequence=3, attributes={"followup_id": "f-1"}
    )
    buffer = io.BytesIO()
    fastavro.writer(buffer, parsed_schema(6), [to_record(event, version=6)])
    buffer.seek(0)
    [record] = list(fastavro.reader(buffer))
    assert from_record(record).event_type.value == event_type
    buffer.seek(0)
    [old] = list(fastavro.reader(buffer, reader_schema=parsed_schema(5)))
    assert old["event_type"] == "unknown"
    assert old["payload"]["attributes"]["followup_id"] == "f-1"
    assert to_record(event, version=5)["event_type"] == "unknown"


def test_the_input_record_is_written_from_v8_clipped_at_standard_and_skipped_by_a_v7_reader() -> (
    None
):
    line = json.dumps({"id": "in-1", "key": "k", "text": "long " * 1000, "tier": "gold"})
    event = new_event(
        "input", job_id="j", key="k", run_id="r", sequence=1, input_id="in-1", input_record=line
    )
    for level, clipped in (("verbose", None), ("standard", True)):
        buffer = io.BytesIO()
        fastavro.writer(buffer, parsed_schema(8), [to_record(event, version=8, level=level)])
        buffer.seek(0)
        [record] = list(fastavro.reader(buffer))
        read = from_record(record).payload
        assert read.input_record_clipped is clipped
        assert line.startswith(read.input_record) and (read.input_record == line) is not clipped
        buffer.seek(0)
        [old] = list(fastavro.reader(buffer, reader_schema=parsed_schema(7)))
        assert "input_record" not in old["payload"]
        assert from_record(old).payload.input_id == "in-1"
    older = io.BytesIO()
    fastavro.writer(older, parsed_schema(7), [to_record(event, version=7)])
    older.seek(0)
    [record] = list(fastavro.reader(older, reader_schema=parsed_schema(8)))
    assert record["payload"]["input_record"] is None
    assert from_record(record).payload.input_id == "in-1"
