"""`ParkedRuns` on the in-memory port: the deadline timer of a parked run, runs set aside and
which goes on first, the bound of a key with a parked run, and settled approvals kept to
tell a duplicate decision from a stale one."""

from __future__ import annotations

import json
from typing import Literal

from streamagents.operators.agent import RunState
from streamagents.operators.agent.approvals import PendingApproval
from streamagents.operators.agent.run_state import ToolAction
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.memory_port import DueTimer, InMemoryKeyedPort
from streamagents.operators.engine.parked_runs import MAX_SETTLED_PER_KEY, ParkedRuns
from streamagents.serde.messages import ToolCall

Status = Literal["waiting", "approved", "rejected", "expired"]


def run(
    run_id: str, started_ms: int = 0, status: Status = "waiting", deadlines=(9_000,)
) -> RunState:
    """A run whose tool turn waits for approvals (parked while one is `waiting`)."""
    calls = [ToolCall(id=f"c{n}", name="refund", arguments={}) for n in range(len(deadlines))]
    approvals = [
        PendingApproval(
            call_id=f"{run_id}.{n + 3:04d}",
            tool_call_id=call.id,
            tool="refund",
            requested_ms=started_ms,
            deadline_ms=deadline,
            status=status,
        )
        for n, (call, deadline) in enumerate(zip(calls, deadlines, strict=True))
    ]
    action = ToolAction(
        calls=calls, request_event_ids=[a.call_id for a in approvals], approvals=approvals
    )
    return RunState(
        run_id=run_id, input_id=run_id, key="k", started_ms=started_ms, messages=[], pending=action
    )


def parked_on(
    port: InMemoryKeyedPort, mode: Literal["queue", "separate_run"] = "queue", bound: int = 3
) -> ParkedRuns:
    return ParkedRuns(declare(port).parked, port, mode, bound)


def test_a_parked_run_waits_on_a_timer_at_its_earliest_deadline() -> None:
    port = InMemoryKeyedPort().at("k")
    parked = parked_on(port)
    parked.park(run("run-1", deadlines=(9_000, 4_000)))
    assert port.timers() == {DueTimer(4_000, False, "k")}
    parked.park(run("run-2", status="approved"))  # nothing waits: no timer
    assert port.timers() == {DueTimer(4_000, False, "k")}


def test_only_separate_run_sets_a_parked_run_aside() -> None:
    port = InMemoryKeyedPort().at("k")
    assert not parked_on(port, "queue").goes_aside(run("run-1"))
    separate = parked_on(port, "separate_run")
    assert separate.separate and separate.goes_aside(run("run-1"))
    assert not separate.goes_aside(run("run-2", status="approved"))


def test_set_aside_runs_are_kept_by_run_id_and_the_earliest_settled_goes_on_first() -> None:
    port = InMemoryKeyedPort().at("k")
    parked = parked_on(port, "separate_run")
    parked.set_aside(run("run-1", started_ms=100))
    parked.set_aside(run("run-2", started_ms=300, status="approved"))
    parked.set_aside(run("run-3", started_ms=200, status="approved"))
    assert parked.has_aside() and parked.aside("run-1") is not None
    assert {run_id for run_id, _ in parked.aside_runs()} == {"run-1", "run-2", "run-3"}
    ready = parked.ready()
    assert ready is not None and ready.run_id == "run-3"
    for run_id in ("run-1", "run-2", "run-3"):
        parked.take_aside(run_id)
    assert not parked.has_aside() and parked.ready() is None


def test_a_key_with_a_parked_run_refuses_inputs_past_its_bound() -> None:
    port = InMemoryKeyedPort().at("k")
    parked = parked_on(port, "queue", bound=3)
    stored = run("run-1").model_dump_json()
    assert parked.refusal_letter("line", stored, queued=1) is None
    letter = parked.refusal_letter('{"text": "x"}', stored, queued=2)
    assert letter is not None
    record = json.loads(letter.to_json())
    assert (record["stage"], record["error_type"], record["key"]) == ("queue", "ParkedKeyFull", "k")
    assert record["input"] == '{"text": "x"}'
    ready = run("run-1", status="approved").model_dump_json()
    assert parked.refusal_letter("line", ready, queued=10) is None  # not parked: no bound
    assert parked.refusal_letter("line", None, queued=10) is None


def test_with_separate_run_the_runs_set_aside_count_against_the_bound() -> None:
    port = InMemoryKeyedPort().at("k")
    parked = parked_on(port, "separate_run", bound=2)
    parked.set_aside(run("run-1"))
    assert parked.refusal_letter("line", None, queued=0) is None
    parked.set_aside(run("run-2"))
    assert parked.refusal_letter("line", None, queued=0) is not None


def test_settled_approvals_are_remembered_up_to_the_latest_bound() -> None:
    port = InMemoryKeyedPort().at("k")
    parked = parked_on(port)
    parked.remember({}, 1)
    assert port.state_of("k") == {}
    parked.remember({"run-1.0003": "fp-1"}, 1)
    assert parked.settled("run-1.0003") == "fp-1"
    assert parked.settled("run-1.0004") is None
    parked.remember({f"run-2.{n:04d}": "expired" for n in range(MAX_SETTLED_PER_KEY)}, 2)
    assert parked.settled("run-1.0003") is None  # the oldest is forgotten
    assert parked.settled("run-2.0000") == "expired"
    assert len(port.state_of("k")["approvals_settled"]) == MAX_SETTLED_PER_KEY
