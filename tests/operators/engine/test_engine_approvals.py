"""Runs waiting for a person's decision, in the engine without Flink: parking, decisions,
deadlines, set-aside runs, the bound per key, and the end of input."""

from __future__ import annotations

from pathlib import Path

from engine_harness import EchoTestModel, EngineHarness, harness

from streamagents.operators.agent import tool

made: list[str] = []


@tool(requires_approval=True, approval_timeout_s=60)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: Order number.
    """
    made.append(order)
    return f"refunded {order}"


def parked_harness(tmp_path: Path, **config: object) -> EngineHarness:
    made.clear()
    return harness(tmp_path, EchoTestModel(), tools=[refund], **config)


def park(h: EngineHarness, key: str, input_id: str, order: str) -> str:
    """Send an input whose run parks on a refund; returns the approval's call id."""
    h.send_input(key, input_id, f"tool:refund {order}")
    h.complete(key)
    h.advance(1000)
    request = h.approval_requests()[-1]
    assert request["input_id"] == input_id
    return request["call_id"]


def test_a_parked_run_holds_no_call_slot_and_its_key_queues_new_inputs(tmp_path: Path) -> None:
    h = parked_harness(tmp_path)
    park(h, "k", "in-1", "A1")
    assert h.runner.pending == []  # no call, no slot while it waits for a person
    assert h.port.at("k").state_of("k")["run"]
    h.send_input("k", "in-2", "after")
    assert h.runner.pending == []  # queued behind the parked run
    assert h.outputs() == []


def test_an_approval_resumes_the_parked_run_then_the_queue(tmp_path: Path) -> None:
    h = parked_harness(tmp_path)
    call_id = park(h, "k", "in-1", "A1")
    h.send_input("k", "in-2", "after")
    h.decide("k", call_id)
    h.settle_all()
    assert made == ["A1"]
    assert [(o["id"], o["text"]) for o in h.outputs()] == [
        ("in-1", "done: refunded A1"),
        ("in-2", "echo: after"),
    ]


def test_a_rejection_reaches_the_model_and_the_tool_never_runs(tmp_path: Path) -> None:
    h = parked_harness(tmp_path)
    call_id = park(h, "k", "in-1", "A1")
    h.decide("k", call_id, "reject")
    h.settle_all()
    assert made == []
    (output,) = h.outputs()
    assert output["status"] == "ok" and output["text"].startswith("done: ")


def test_a_duplicate_decision_changes_nothing(tmp_path: Path) -> None:
    h = parked_harness(tmp_path)
    call_id = park(h, "k", "in-1", "A1")
    h.decide("k", call_id)
    h.settle_all()
    h.decide("k", call_id)
    h.settle_all()
    assert made == ["A1"]
    assert len(h.outputs()) == 1
    assert h.dead_letters() == []


def test_an_approval_past_its_deadline_is_rejected_and_the_run_goes_on(tmp_path: Path) -> None:
    h = parked_harness(tmp_path)
    park(h, "k", "in-1", "A1")
    h.advance(61_000)  # the deadline timer fires
    h.settle_all()
    assert made == []
    (output,) = h.outputs()
    assert output["id"] == "in-1" and "done: " in output["text"]


def test_a_parked_run_at_the_end_of_input_is_an_approval_pending_dead_letter(
    tmp_path: Path,
) -> None:
    h = parked_harness(tmp_path)
    park(h, "k", "in-1", "A1")
    h.send_input("k", "in-2", "after")
    h.end_input()
    (letter,) = h.dead_letters()  # with the input, to send again
    assert (letter["id"], letter["error_type"]) == ("in-1", "ApprovalPending")
    assert [(o["id"], o["status"]) for o in h.outputs()] == [("in-1", "error"), ("in-2", "ok")]


def test_separate_run_sets_a_parked_run_aside_and_the_next_input_runs(tmp_path: Path) -> None:
    h = parked_harness(tmp_path, while_parked="separate_run")
    call_id = park(h, "k", "in-1", "A1")
    h.send_input("k", "in-2", "meanwhile")
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-2"]
    h.decide("k", call_id)
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-2", "in-1"]
    assert made == ["A1"]


def test_a_key_with_a_parked_run_refuses_inputs_past_its_bound(tmp_path: Path) -> None:
    h = parked_harness(tmp_path, max_inputs_per_parked_key=2)
    park(h, "k", "in-1", "A1")
    h.send_input("k", "in-2", "one")  # the parked run and this one: 2 held
    h.send_input("k", "in-3", "two")
    (letter,) = h.dead_letters()
    assert (letter["id"], letter["error_type"]) == ("in-3", "ParkedKeyFull")
    h.send_input("other", "in-4", "free")  # other keys are not bounded by it
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-4"]


def test_a_decision_survives_a_restore_of_the_parked_run(tmp_path: Path) -> None:
    h = parked_harness(tmp_path)
    call_id = park(h, "k", "in-1", "A1")
    checkpoint = h.checkpoint()
    h.restore(checkpoint)
    h.decide("k", call_id)
    h.settle_all()
    assert made == ["A1"]
    assert [o["id"] for o in h.outputs()] == ["in-1"]


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: Order number.
    """
    made.append(f"lookup {order}")
    return f"{order} delivered"


def test_a_decision_while_the_turns_other_call_runs_is_applied_when_it_returns(
    tmp_path: Path,
) -> None:
    made.clear()
    h = harness(tmp_path, EchoTestModel(), tools=[refund, lookup])
    h.send_input("k", "in-1", "tool:lookup A1;refund A2")
    h.complete("k")
    h.advance(1000)  # the lookup runs at once, the refund waits for a person
    (request,) = h.approval_requests()
    assert [c.key for c in h.runner.pending] == ["k"]
    h.decide("k", request["call_id"])
    assert made == []  # nothing runs before the lookup's result is back
    h.settle_all()
    assert made == ["lookup A1", "A2"]
    (output,) = h.outputs()
    assert (output["id"], output["tool_calls"]) == ("in-1", 2)


def test_a_set_aside_run_decided_while_its_key_runs_another_goes_on_after_it(
    tmp_path: Path,
) -> None:
    h = parked_harness(tmp_path, while_parked="separate_run")
    call_id = park(h, "k", "in-1", "A1")
    h.send_input("k", "in-2", "meanwhile")
    h.send_input("k", "in-3", "later")
    h.decide("k", call_id)  # in-2's call is out: in-1 waits for it, ahead of in-3
    assert made == []
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-2", "in-1", "in-3"]
    history = h.engine._memory.load(h.port.at("k").now_ms())
    users = [m.content for m in history if m.role == "user"]
    assert users == ["meanwhile", "tool:refund A1", "later"]  # the parked turn joins after
