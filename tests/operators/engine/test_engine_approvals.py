"""Runs waiting for a person's decision, in the engine without Flink: parking, decisions,
deadlines, set-aside runs, the bound per key, and the end of input."""

from __future__ import annotations

from pathlib import Path

from engine_harness import EngineHarness, harness
from otlp_collector import attributes, received_spans

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.operators.agent import TelemetryConfig, tool
from streamagents.operators.agent.approvals import ApprovalDecision, decision_line
from streamagents.testing import EchoTestModel

made: list[str] = []


@tool(requires_approval=True, approval_timeout_s=60, by_tool_name=True)
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


def test_unknown_conflicting_and_stale_decisions_are_dead_letters_and_change_nothing(
    tmp_path: Path,
) -> None:
    h = parked_harness(tmp_path)
    call_id = park(h, "k", "in-1", "A1")
    late = park(h, "x", "in-2", "X1")
    h.decide("k", "run-nobody.0004")  # no run of the key asked for it
    h.decide("k", call_id)
    h.settle_all()
    h.decide("k", call_id, "reject")  # settled as approved: a conflict, not a duplicate
    h.advance(61_000)  # in-2's call is rejected as timed out
    h.settle_all()
    h.decide("x", late)
    assert made == ["A1"]
    letters = [(d["key"], d["error_type"]) for d in h.dead_letters()]
    assert letters == [("k", "UnknownCall"), ("k", "AlreadyDecided"), ("x", "ApprovalExpired")]
    assert {d["stage"] for d in h.dead_letters()} == {"approval"}
    assert sorted(o["id"] for o in h.outputs()) == ["in-1", "in-2"]


def test_set_aside_runs_parked_at_the_end_of_input_are_approval_pending(tmp_path: Path) -> None:
    h = parked_harness(tmp_path, while_parked="separate_run")
    park(h, "k", "in-1", "A1")
    park(h, "k", "in-2", "A2")  # both set aside: the key runs nothing
    h.end_input()
    assert sorted(d["id"] for d in h.dead_letters()) == ["in-1", "in-2"]
    assert {d["error_type"] for d in h.dead_letters()} == {"ApprovalPending"}
    assert h.port.timers() == set()


def test_each_approval_wait_is_a_span_sent_live(tmp_path: Path) -> None:
    ok = StubReply(b"", headers={})
    with LoopbackStubServer(lambda _request: ok) as collector:
        h = parked_harness(tmp_path, telemetry=TelemetryConfig(otlp_endpoint=collector.url))
        approved = park(h, "a", "in-a", "A1")
        rejected = park(h, "r", "in-r", "R1")
        expired = park(h, "x", "in-x", "X1")
        h.decide("a", approved)
        h.decide("r", rejected, "reject")
        h.settle_all()
        h.advance(61_000)  # x's deadline passes
        h.settle_all()
        abandoned = park(h, "e", "in-e", "E1")
        h.end_input()
        h.close()
        spans = received_spans(collector, h.config.job_id)
    waits = {
        attributes(s)["streamagents.approval.call_id"]: attributes(s)
        for s in spans
        if s.name == "await_approval refund"
    }
    assert waits[approved]["streamagents.approval.decision"] == "approve"
    assert waits[rejected]["streamagents.approval.decision"] == "reject"
    assert waits[expired]["streamagents.approval.decision"] == "expired"
    assert waits[expired]["streamagents.approval.timed_out"] is True
    assert waits[abandoned]["streamagents.incomplete"] is True


def decide_by_tool(h: EngineHarness, key: str, match: dict[str, str] | None) -> None:
    """A decision naming its call by tool and arguments, as a person reads the request."""
    decision = ApprovalDecision(tool="refund", match=match, decision="approve")
    h.send(key, decision_line(decision, key))


def test_a_decision_naming_tool_and_arguments_decides_the_call_that_fits(tmp_path: Path) -> None:
    h = parked_harness(tmp_path, while_parked="separate_run")
    park(h, "k", "in-1", "A1")
    park(h, "k", "in-2", "B2")
    decide_by_tool(h, "k", {"order": "B2"})
    h.settle_all()
    assert made == ["B2"]
    assert [o["id"] for o in h.outputs()] == ["in-2"]
    assert h.dead_letters() == []


def test_a_decision_that_fits_several_calls_or_none_is_a_dead_letter(tmp_path: Path) -> None:
    h = parked_harness(tmp_path, while_parked="separate_run")
    park(h, "k", "in-1", "A1")
    park(h, "k", "in-2", "B2")
    decide_by_tool(h, "k", None)
    decide_by_tool(h, "k", {"order": "C3"})
    h.settle_all()
    assert made == [] and h.outputs() == []
    ambiguous, unknown = h.dead_letters()
    assert ambiguous["error_type"] == "AmbiguousDecision"
    assert "2 waiting calls of 'refund'" in ambiguous["reason"]
    assert unknown["error_type"] == "UnknownCall"
    assert (
        unknown["reason"]
        == "no call of 'refund' with the given order of this key waits for a decision"
    )
