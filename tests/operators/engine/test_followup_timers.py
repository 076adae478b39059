"""`FollowupTimers` on the in-memory port: follow-ups kept with their due-time timers, taken
in due order, cancelled, and turned into dead letters holding their line once the input
has ended."""

from __future__ import annotations

import json

from streamagents.operators.agent.followups import Followup
from streamagents.operators.engine.followup_timers import FollowupTimers
from streamagents.operators.engine.input_end import Phase
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.memory_port import DueTimer, InMemoryKeyedPort


def followup(followup_id: str, due_ms: int, note: str = "check again") -> Followup:
    return Followup(
        id=followup_id, key="k", note=note, scheduled_ms=0, due_ms=due_ms, run_id="run-1"
    )


def timers_on(port: InMemoryKeyedPort, key_field: str = "key") -> FollowupTimers:
    return FollowupTimers(declare(port).followups, port, True, key_field)


def test_kept_follow_ups_wait_with_a_timer_each_and_come_due_in_order() -> None:
    port = InMemoryKeyedPort().at("k")
    timers = timers_on(port)
    late, early = followup("f-late", 9_000, "late"), followup("f-early", 5_000, "early")
    assert timers.keep([late, early], Phase.RUNNING) == []
    assert [f.id for f in timers.waiting()] == ["f-early", "f-late"]
    assert port.timers() == {DueTimer(5_000, False, "k"), DueTimer(9_000, False, "k")}
    due = [json.loads(line) for line in timers.take_due(6_000)]
    assert [(d["id"], d["text"], d["key"]) for d in due] == [("followup-f-early", "early", "k")]
    assert [f.id for f in timers.waiting()] == ["f-late"]


def test_the_line_puts_the_key_at_a_nested_key_field() -> None:
    port = InMemoryKeyedPort().at("k")
    timers = timers_on(port, key_field="user.id")
    timers.keep([followup("f", 1_000)], Phase.RUNNING)
    (line,) = timers.take_due(1_000)
    assert json.loads(line)["user"] == {"id": "k"}


def test_cancelled_follow_ups_no_longer_wait() -> None:
    port = InMemoryKeyedPort().at("k")
    timers = timers_on(port)
    timers.keep([followup("a", 1_000), followup("b", 2_000)], Phase.RUNNING)
    timers.cancel(["a", "unknown"])
    assert [f.id for f in timers.waiting()] == ["b"]


def test_after_the_end_of_input_a_follow_up_is_a_dead_letter_holding_its_line() -> None:
    port = InMemoryKeyedPort().at("k")
    timers = timers_on(port)
    (letter,) = timers.keep([followup("f", 5_000, "ping")], Phase.DRAINING)
    assert timers.waiting() == [] and port.timers() == set()
    record = json.loads(letter.to_json())
    assert (record["stage"], record["error_type"]) == ("followup", "FollowupPending")
    assert record["id"] == "followup-f" and record["key"] == "k"
    assert json.loads(record["input"])["text"] == "ping"


def test_waiting_follow_ups_dropped_at_the_end_of_input_leave_state() -> None:
    port = InMemoryKeyedPort().at("k")
    timers = timers_on(port)
    timers.keep([followup("a", 1_000), followup("b", 2_000)], Phase.RUNNING)
    letters = timers.drop(timers.waiting())
    assert [json.loads(letter.to_json())["id"] for letter in letters] == [
        "followup-a",
        "followup-b",
    ]
    assert timers.waiting() == [] and "followups" not in port.state_of("k")


def test_with_follow_ups_off_none_is_read_from_state() -> None:
    port = InMemoryKeyedPort().at("k")
    state = declare(port).followups
    FollowupTimers(state, port, True, "key").keep([followup("a", 1_000)], Phase.RUNNING)
    assert FollowupTimers(state, port, False, "key").waiting() == []
