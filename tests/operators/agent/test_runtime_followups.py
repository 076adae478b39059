"""Scheduled follow-ups in the runtime (no Flink): the tool, its bounds, cancelling, the
follow-up's input line, and a run's scheduled follow-ups surviving a state round trip."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from doubles import drive, emitted_json, scripted_runtime
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streamagents.operators.agent import RunState, Step
from streamagents.operators.agent.config import AgentConfig, FollowupConfig, ModelSpec
from streamagents.operators.agent.followups import (
    TOOL_NAME,
    Followup,
    followup_line,
    is_followup_line,
    schedule,
)
from streamagents.operators.agent.records import parse_input
from streamagents.operators.agent.run_state import Continue, run_id_for
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.serde.events import AgentEvent
from streamagents.testing import ScriptedTestModel, answer, calls

T0 = 1_000_000
ON = FollowupConfig(enabled=True, min_delay_s=10, max_delay_s=3600, max_pending=2)
SCHEDULE_ID = run_id_for("streamagents", "in-1") + ".0004"
"""The follow-up id of the first call of the first turn: its tool_request event's id."""


def followup_call(after_s: Any = 60, note: str = "check the parcel again") -> Any:
    return calls((TOOL_NAME, {"after_s": after_s, "note": note}))


def runtime(tmp_path: Path, replies: list[Any], followups: FollowupConfig = ON) -> Any:
    rt = scripted_runtime(tmp_path, replies, followups=followups)
    rt.clock_ms = lambda: float(T0)
    return rt


def waiting(n: int, key: str = "k") -> list[Followup]:
    return [
        Followup(id=f"f-{i}", key=key, note=f"n{i}", scheduled_ms=0, due_ms=T0 + i, run_id="r")
        for i in range(n)
    ]


def finish(rt: Any, step: Step, now_ms: int = T0) -> list[Step]:
    """Drive a started run to its end the way the engine does."""
    steps = [step]
    while step.state is not None:
        outcome = asyncio.run(rt.perform(step.state, []))
        now_ms += 10
        step = rt.advance(step.state, outcome, now_ms, [])
        steps.append(step)
    return steps


def types(steps: list[Step]) -> list[str]:
    return [json.loads(e.json())["event_type"] for s in steps for e in s.events]


def sent_result(model: ScriptedTestModel) -> dict[str, Any]:
    """The tool result the model read on its second call."""
    [result] = [m for m in model.calls[1].messages if m.role == "tool"]
    return {"error": result.is_error, "text": result.content}


def test_the_tool_is_offered_only_when_enabled(tmp_path: Path) -> None:
    on = runtime(tmp_path, [answer("hi")])
    drive(on, '{"id": "in-1", "key": "k", "text": "hello"}')
    [spec] = on.model.calls[0].tools
    assert spec.name == TOOL_NAME and "between 10 and 3600" in spec.description
    off = runtime(tmp_path, [answer("hi")], FollowupConfig())
    drive(off, '{"id": "in-1", "key": "k", "text": "hello"}')
    assert off.model.calls[0].tools == []


def test_a_scheduled_followup_ends_with_the_run_and_the_model_reads_its_due_time(
    tmp_path: Path,
) -> None:
    rt = runtime(tmp_path, [followup_call(90), answer("I will check again later")])
    done = drive(rt, '{"id": "in-1", "key": "k", "text": "where is my parcel?"}')
    assert done.output["status"] == "ok"
    [followup] = done.steps[-1].followups
    assert (followup.id, followup.key, followup.note) == (
        SCHEDULE_ID,
        "k",
        "check the parcel again",
    )
    assert followup.due_ms - followup.scheduled_ms == 90_000
    result = sent_result(rt.model)
    assert not result["error"]
    told = json.loads(result["text"])
    assert told["followup_id"] == SCHEDULE_ID and told["due_ms"] == followup.due_ms
    assert told["due_at"].endswith("+00:00")
    scheduled = [e for e in done.events if e["event_type"] == "followup_scheduled"]
    assert [e["payload"]["attributes"]["followup_id"] for e in scheduled] == [SCHEDULE_ID]
    # the call is answered by the run itself: no tool ran, no unknown tool was counted
    assert done.output["tool_calls"] == 1


@pytest.mark.parametrize(
    ("after_s", "refusal"),
    [
        (5, "outside the allowed delays: between 10 and 3600"),
        (3601, "outside the allowed delays"),
        ("60", "must be a number"),
        (True, "must be a number"),
        (float("nan"), "outside the allowed delays"),
        (float("inf"), "outside the allowed delays"),
    ],
)
def test_a_delay_outside_the_bounds_is_refused_to_the_model(
    tmp_path: Path, after_s: Any, refusal: str
) -> None:
    rt = runtime(tmp_path, [followup_call(after_s), answer("sorry")])
    done = drive(rt, '{"id": "in-1", "key": "k", "text": "hi"}')
    assert done.steps[-1].followups == []
    result = sent_result(rt.model)
    assert result["error"] and refusal in result["text"]
    assert "followup_scheduled" not in [e["event_type"] for e in done.events]
    assert done.output["status"] == "ok"


def test_an_empty_or_overlong_note_is_refused(tmp_path: Path) -> None:
    for note, refusal in [("  ", "non-empty"), ("x" * 2001, "at most 2000")]:
        rt = runtime(tmp_path, [followup_call(60, note), answer("sorry")])
        done = drive(rt, '{"id": "in-1", "key": "k", "text": "hi"}')
        assert done.steps[-1].followups == []
        assert refusal in sent_result(rt.model)["text"]


def test_max_pending_counts_the_keys_waiting_followups_and_the_runs_own(
    tmp_path: Path,
) -> None:
    two_calls = calls(
        (TOOL_NAME, {"after_s": 60, "note": "first"}),
        (TOOL_NAME, {"after_s": 60, "note": "second"}),
    )
    config = ON.model_copy(update={"cancel_on_input": False})
    rt = runtime(tmp_path, [two_calls, answer("ok")], config)
    record = rt.parse('{"id": "in-1", "key": "k", "text": "hi"}')
    steps = finish(rt, rt.start(record, [], T0, waiting(1)))
    assert [f.note for f in steps[-1].followups] == ["first"]
    results = [m for m in rt.model.calls[1].messages if m.role == "tool"]
    assert [r.is_error for r in results] == [False, True]
    assert "max_pending=2" in results[1].content


def test_a_new_input_cancels_the_keys_waiting_followups(tmp_path: Path) -> None:
    rt = runtime(tmp_path, [answer("hello again")])
    record = rt.parse('{"id": "in-2", "key": "k", "text": "any news?"}')
    step = rt.start(record, [], T0, waiting(2))
    assert step.cancelled == ["f-0", "f-1"]
    cancelled = [json.loads(e.json()) for e in step.events]
    cancelled = [e for e in cancelled if e["event_type"] == "followup_cancelled"]
    assert [e["payload"]["attributes"]["cancelled_by"] for e in cancelled] == ["in-2", "in-2"]
    assert step.state is not None and step.state.followups_waiting == 0


def test_without_cancel_on_input_they_stay(tmp_path: Path) -> None:
    config = ON.model_copy(update={"cancel_on_input": False})
    rt = runtime(tmp_path, [answer("hello again")], config)
    step = rt.start(rt.parse('{"id": "in-2", "key": "k", "text": "?"}'), [], T0, waiting(2))
    assert step.cancelled == [] and "followup_cancelled" not in types([step])
    assert step.state is not None and step.state.followups_waiting == 2


def test_a_followups_run_is_logged_as_fired_and_cancels_nothing(tmp_path: Path) -> None:
    rt = runtime(tmp_path, [answer("the parcel arrived")])
    [due, other] = waiting(2)
    line = followup_line(due, "customer.id")
    record = parse_input(line, "customer.id")
    assert (record.key, record.message.content, record.id) == ("k", "n0", "followup-f-0")
    assert is_followup_line(record.raw)
    steps = finish(rt, rt.start(record, [], T0, [other]))
    assert steps[0].cancelled == []
    assert types(steps)[:2] == ["input", "followup_fired"]
    fired = json.loads(steps[0].events[1].json())["payload"]["attributes"]
    assert fired == {
        "followup_id": "f-0",
        "scheduled_by": "r",
        "due_ms": str(T0),
        "input_id": "followup-f-0",
    }
    output = emitted_json(steps[-1].output)
    assert output["id"] == "followup-f-0" and output["attributes"]["followup"]["id"] == "f-0"
    for event in (e for s in steps for e in s.events):
        AgentEvent.model_validate_json(event.json())


def test_a_runs_scheduled_followups_survive_its_state_round_trip(tmp_path: Path) -> None:
    """After a restore the engine resumes a run from its state JSON: a follow-up the run
    scheduled before the failure is still handed over when the run ends."""

    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: Order number.
        """
        return "in transit"

    turn = calls((TOOL_NAME, {"after_s": 60, "note": "again"}), ("lookup", {"order": "O-1"}))
    rt = scripted_runtime(
        tmp_path, [turn, answer("in transit; I will look again")], [lookup], followups=ON
    )
    rt.clock_ms = lambda: float(T0)
    step = rt.start(rt.parse('{"id": "in-1", "key": "k", "text": "hi"}'), [], T0)
    step = rt.advance(step.state, asyncio.run(rt.perform(step.state, [])), T0 + 1, [])
    assert step.state is not None and [f.note for f in step.state.followups] == ["again"]
    restored = RunState.model_validate_json(step.state.model_dump_json())
    steps = finish(rt, Continue(state=restored), T0 + 2)
    assert [f.note for f in steps[-1].followups] == ["again"]


def test_a_declared_tool_with_the_builtin_name_is_refused(tmp_path: Path) -> None:
    def schedule_followup(after_s: float, note: str) -> str:
        """A clash.

        Args:
            after_s: Delay.
            note: Note.
        """
        return "no"

    cfg = AgentConfig(model=ModelSpec(provider="test", model="scripted"), followups=ON)
    base = scripted_runtime(tmp_path, [])
    with pytest.raises(ValueError, match="named 'schedule_followup'"):
        type(base)(cfg, ScriptedTestModel([]), ToolRegistry([schedule_followup]), base.store)


def test_bounds_in_the_wrong_order_are_a_clear_config_error() -> None:
    with pytest.raises(ValidationError, match="min_delay_s=600 is above max_delay_s=60"):
        FollowupConfig(enabled=True, min_delay_s=600, max_delay_s=60)
    with pytest.raises(ValidationError, match="max_pending"):
        FollowupConfig(max_pending=0)
    with pytest.raises(ValidationError, match="min_delay_s"):
        FollowupConfig(min_delay_s=float("nan"))


@pytest.mark.parametrize("key_field", ["id", "text", "followup.key"])
def test_a_key_field_a_followup_line_uses_itself_is_refused(key_field: str) -> None:
    model = ModelSpec(provider="test", model="scripted")
    with pytest.raises(ValidationError, match=f"the key field '{key_field}' cannot be under it"):
        AgentConfig(model=model, key_field=key_field, followups=ON)
    assert AgentConfig(model=model, key_field=key_field).key_field == key_field


@given(after_s=st.floats(allow_nan=True, allow_infinity=True), waiting_now=st.integers(0, 5))
def test_schedule_keeps_its_bounds_for_any_delay(after_s: float, waiting_now: int) -> None:
    made = schedule(
        ON,
        {"after_s": after_s, "note": "n"},
        followup_id="f",
        key="k",
        run_id="r",
        now_ms=T0,
        waiting=waiting_now,
    )
    if isinstance(made, Followup):
        assert ON.min_delay_s * 1000 <= made.due_ms - T0 <= ON.max_delay_s * 1000 + 1
        assert waiting_now < ON.max_pending
    else:
        assert made


@pytest.mark.parametrize(
    "followup",
    [
        {},
        {"id": [1, {"deep": [[[]]]}], "due_ms": float("nan"), "run_id": None},
        {"id": "\ud800", "due_ms": "soon"},
        "not an object",
    ],
)
def test_a_crafted_followup_field_runs_as_an_input_and_logs_what_it_can(
    tmp_path: Path, followup: Any
) -> None:
    """Anyone may send a line with `followup`: it is an ordinary run's input, never a
    follow-up's (only the engine makes those) and never a crash."""
    rt = runtime(tmp_path, [answer("ok")])
    line = json.dumps({"id": "x-1", "key": "k", "text": "hi", "followup": followup}, allow_nan=True)
    try:
        record = rt.parse(line)
    except Exception as exc:  # strict JSON: NaN and lone surrogates are refused at parsing
        assert type(exc).__name__ == "InputError"
        return
    steps = finish(rt, rt.start(record, [], T0, waiting(1)))
    assert emitted_json(steps[-1].output)["status"] == "ok"
    assert "followup_fired" not in types(steps)
    assert steps[0].cancelled == ["f-0"]
    for event in (e for s in steps for e in s.events):
        AgentEvent.model_validate_json(event.json())
