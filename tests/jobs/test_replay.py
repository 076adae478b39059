"""Replay on the engine harness: a recorded log turned into a replay job's input lines and
run again, as `streamagents replay` does it (the job itself: tests/e2e/test_run_cli.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from replay_runs import CALLS, outcomes, record, replay, write_log

from streamagents.jobs.replay.lines import (
    InputSource,
    RecordedRun,
    choose,
    parse_time_ms,
    recorded_runs,
)
from streamagents.testing import EchoTestModel, ScriptedTestModel, answer

LINES = [
    ("A", json.dumps({"id": "a-1", "key": "A", "text": "tool:lookup O-1"})),
    ("B", json.dumps({"id": "b-1", "key": "B", "text": "tool:snapshot O-2"})),
    ("A", json.dumps({"id": "a-2", "key": "A", "text": "tool:lookup O-1;snapshot O-3"})),
    ("B", json.dumps({"key": "B", "text": "thanks"})),  # no id: the engine numbers it
    ("A", json.dumps({"id": "a-3", "key": "A", "text": "bye"})),
]


def test_replaying_the_baseline_with_a_deterministic_model_reproduces_the_recording(
    tmp_path: Path,
) -> None:
    recorded = record(tmp_path, EchoTestModel(), LINES)
    log = write_log(recorded, tmp_path / "log", "verbose")
    CALLS.clear()
    replayed, lines, left_out = replay(tmp_path, log, EchoTestModel())
    assert left_out == [] and len(lines) == len(LINES)
    before, after = outcomes(recorded), outcomes(replayed)
    assert len(before) == len(LINES)
    assert after == before  # zero differences: text, status, tool calls with arguments
    assert CALLS == {}  # every tool call was answered from the recording
    by_id = {o["id"]: o for o in replayed.outputs()}
    assert "parcel O-2" in by_id["b-1"]["text"]


def test_a_replay_keeps_input_ids_and_keys_and_marks_its_runs_as_replays(tmp_path: Path) -> None:
    recorded = record(tmp_path, EchoTestModel(), LINES)
    log = write_log(recorded, tmp_path / "log", "verbose")
    replayed, _, _ = replay(tmp_path, log, EchoTestModel())
    production = {o["id"]: o for o in recorded.outputs()}
    for output in replayed.outputs():
        original = production[output["id"]]
        assert output["key"] == original["key"]
        assert output["run_id"].startswith("replay-") and original["run_id"].startswith("run-")
    runs = {o["run_id"]: production[o["id"]]["run_id"] for o in replayed.outputs()}
    events = replayed.records("events")
    assert events and all(
        e["payload"]["attributes"]["replay_of"] == runs[e["run_id"]] for e in events
    )


def test_a_candidate_with_a_changed_prompt_is_asked_with_it_over_its_own_memory(
    tmp_path: Path,
) -> None:
    lines = [(k, line) for k, line in LINES if k == "A"]
    recorded = record(tmp_path, EchoTestModel(), lines, system_prompt="Be brief.")
    log = write_log(recorded, tmp_path / "log", "verbose")
    candidate = ScriptedTestModel(
        [
            answer("candidate one"),  # it answers without the tool the recording called
            answer("candidate two"),
            answer("candidate three"),
        ]
    )
    replayed, _, _ = replay(tmp_path, log, candidate, system_prompt="Be warm and brief.")
    assert [o["text"] for o in replayed.outputs()] == [
        "candidate one",
        "candidate two",
        "candidate three",
    ]
    first, second, _ = candidate.calls
    assert first.messages[0].content == "Be warm and brief."
    # the key's memory holds the candidate's answers, not the recorded ones
    assert [m.content for m in second.messages if m.role == "assistant"] == ["candidate one"]
    fingerprints = {
        e["run_id"][:4]: e["payload"]["attributes"]["config_fingerprint"]
        for h in (recorded, replayed)
        for e in h.records("events")
        if e["event_type"] == "input"
    }
    assert fingerprints["run-"] != fingerprints["repl"]


def test_a_clipped_log_replays_only_with_the_named_source_joined_by_input_id(
    tmp_path: Path,
) -> None:
    long_text = "Is this clear? " + "x" * 3000
    source = tmp_path / "source.jsonl"
    given_lines = [
        json.dumps({"id": "long-1", "key": "A", "text": long_text}),
        json.dumps({"key": "A", "text": "short, without an id " + "y" * 2100}),
    ]
    source.write_text("".join(line + "\n" for line in given_lines))
    recorded = record(tmp_path, EchoTestModel(), [("A", line) for line in given_lines])
    log = write_log(recorded, tmp_path / "log", "standard")

    _, lines, left_out = replay(tmp_path / "without", log, EchoTestModel())
    assert lines == []
    assert [entry.input_id for entry in left_out[:1]] == ["long-1"]
    assert all("kept only a prefix" in entry.reason for entry in left_out)
    assert all("--inputs-from" in entry.reason for entry in left_out)

    replayed, lines, left_out = replay(tmp_path, log, EchoTestModel(), source=source)
    assert left_out == [] and len(lines) == 2
    assert outcomes(replayed) == outcomes(recorded)


def test_a_log_written_before_v8_holds_no_input_record_and_its_runs_are_listed(
    tmp_path: Path,
) -> None:
    recorded = record(tmp_path, EchoTestModel(), LINES[:2])
    log = write_log(recorded, tmp_path / "log", "verbose", version=7)
    _, lines, left_out = replay(tmp_path, log, EchoTestModel())
    assert lines == []
    assert {e.input_id for e in left_out} == {"a-1", "b-1"}
    assert all("before schema v8" in e.reason for e in left_out)


def test_runs_come_in_their_keys_recorded_order_with_the_key_sequence(tmp_path: Path) -> None:
    recorded = record(tmp_path, EchoTestModel(), LINES)
    runs = recorded_runs([write_log(recorded, tmp_path / "log", "verbose")])
    by_key: dict[str, list[RecordedRun]] = {}
    for run in runs:
        by_key.setdefault(run.key, []).append(run)
    assert [r.input_id for r in by_key["A"]] == ["a-1", "a-2", "a-3"]
    assert [r.key_sequence for r in by_key["A"]] == [0, 1, 2]
    assert [r.key_sequence for r in by_key["B"]] == [0, 1]
    assert by_key["B"][1].input_id.endswith("-0")  # the engine's number for a line without id
    tools = by_key["A"][1].tools
    assert [(t.name, t.arguments) for t in tools] == [
        ("lookup", {"order": "O-1"}),
        ("snapshot", {"order": "O-3"}),
    ]
    assert tools[1].result.parts[1].ref is not None  # the image comes back as its media ref


def _run(number: int, key: str, at: int) -> RecordedRun:
    return RecordedRun(f"run-{number}", key, f"in-{number}", at, None, "{}", False)


@settings(max_examples=50, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1))
def test_a_sample_is_the_same_runs_every_time_and_a_larger_one_holds_a_smaller(
    low: float, high: float
) -> None:
    low, high = sorted((low, high))
    runs = [_run(n, "k", n) for n in range(300)]
    small, large = choose(runs, sample=low), choose(runs, sample=high)
    assert choose(runs, sample=low) == small
    assert {r.run_id for r in small} <= {r.run_id for r in large}
    assert abs(len(large) - high * 300) < 60


def test_keys_and_a_time_range_choose_runs(tmp_path: Path) -> None:
    runs = [_run(n, "A" if n % 2 else "B", 1_000 + n) for n in range(10)]
    assert [r.run_id for r in choose(runs, keys={"A"}, since_ms=1_003, until_ms=1_008)] == [
        "run-3",
        "run-5",
        "run-7",
    ]
    assert parse_time_ms("2026-12-02T00:00:00Z") == parse_time_ms("1796169600000")


def test_a_hostile_inputs_source_loads_and_still_joins_its_good_lines(tmp_path: Path) -> None:
    deep = '{"key": "k", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    huge = json.dumps({"id": "huge-1", "key": "k", "text": "x" * 2_000_000})
    lines = [
        b'{"id": "ok-1", "key": "k", "text": "hi"}',
        b'{"id": "bad-utf8", "key": "k", "text": "\xff\xfe caf\xe9"}',
        deep.encode(),
        b'{"id": "nan-1", "key": "k", "score": NaN}',
        b"not json at all",
        huge.encode(),
    ]
    (tmp_path / "inputs.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    source = InputSource(tmp_path / "inputs.jsonl")
    assert source.line("ok-1") == lines[0].decode()
    assert "\ufffd" in (source.line("bad-utf8") or "")
    assert source.line(hashlib.sha256(deep.encode()).hexdigest() + "-0") == deep
    assert source.line("nan-1") == lines[3].decode()
    assert source.line(hashlib.sha256(b"not json at all").hexdigest() + "-0") == "not json at all"
    assert source.line("huge-1") == huge
