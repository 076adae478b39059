"""Approvals end to end: one mini-cluster job where runs park, wait for decisions and go on.

Runs that call `refund_order` or `cancel_order` park; the decisions come later on the same
input (a `hold` delays them until the runs have parked): approve, a duplicate, a conflict,
reject with a comment, approve with edited arguments, approve one call of a mixed turn, an
unknown call id, and one for a call whose 2 s deadline has passed. One run is never
decided: the bounded input ends while it waits. A key at its `max_inputs_per_parked_key`
refuses one more input. A second agent in the same job (`while_parked: separate_run`)
answers a parked key's new input at once. The tests below each check one promised
behaviour on what the job emitted, what the stub received and which tool calls were made.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import e2e_tools
import pytest
from doubles import GeminiScript, function_responses
from e2e_tools import refunds_made
from otlp_collector import attributes, received_spans
from pyflink.common import Types
from scripted_job import scripted_environment, stub_gemini

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.operators.agent import AgentConfig, Budgets
from streamagents.operators.agent.config import TelemetryConfig, ToolRef
from streamagents.operators.agent.run_state import run_id_for
from streamagents.operators.flink import agent_stream

pytestmark = pytest.mark.e2e

JOB_ID = "approvals-e2e"
SEPARATE_JOB_ID = "approvals-e2e-separate"
"""The second agent's job id (its run ids derive from it)."""
RUN_TIMEOUT_S = 4.0
"""Shorter than the time the approved runs stay parked: parked time must not count."""
DECISIONS_AFTER_S = 9.0
"""When the decisions come, from the source's start: long enough after the agent function's
start (importing its provider's SDK, a few seconds on a loaded machine) that the approved
runs stay parked longer than RUN_TIMEOUT_S."""
TOKEN = uuid.uuid4().hex[:8]
ORDERS = {name: f"{name}-{TOKEN}" for name in ("AP", "RJ", "ED", "TO", "MX", "END", "SEP", "SEP4")}


def approval_id(input_id: str, call_index: int = 0, job_id: str = JOB_ID) -> str:
    """The approval id of a call of a run's first turn: its tool_request event's id."""
    return f"{run_id_for(job_id, input_id)}.{4 + call_index:04d}"


def decision(key: str, input_id: str, verdict: str = "approve", **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "approval": {"call_id": approval_id(input_id), "decision": verdict, **fields},
    }


INPUTS = [
    {"id": "ap-1", "key": "ap", "text": f"scenario:refund {ORDERS['AP']}"},
    {"id": "ap-2", "key": "ap", "text": "scenario:plain after-refund"},
    {"id": "rj-1", "key": "rj", "text": f"scenario:refund {ORDERS['RJ']}"},
    {"id": "ed-1", "key": "ed", "text": f"scenario:refund {ORDERS['ED']}"},
    {"id": "to-1", "key": "to", "text": f"scenario:cancel {ORDERS['TO']}"},
    {"id": "mx-1", "key": "mx", "text": f"scenario:refund_and_look {ORDERS['MX']}"},
    {"id": "end-1", "key": "end", "text": f"scenario:refund {ORDERS['END']}"},
    {"id": "ap-3", "key": "ap", "text": "scenario:plain one-too-many", "hold_s": DECISIONS_AFTER_S},
    decision("ap", "ap-1", by="ana"),
    decision("ap", "ap-1", by="bob"),  # the same decision again: ignored
    decision("ap", "ap-1", "reject", by="cy"),  # a conflicting one: a dead letter
    decision("rj", "rj-1", "reject", by="bo", comment="outside 30 days"),
    decision("ed", "ed-1", by="ana", arguments={"order": ORDERS["ED"], "amount": 5}),
    decision("mx", "mx-1", by="ana"),
    {"key": "rj", "approval": {"call_id": "no-such-call", "decision": "approve"}},
    decision("to", "to-1", by="late"),  # its 2 s deadline has passed
    {"id": "last-1", "key": "last", "text": "scenario:plain last", "hold_s": 4.0},
]
REFUSED = {"ap-3"}
"""Arrives while ap-1 is parked and ap-2 waits: beyond max_inputs_per_parked_key=2."""
SEPARATE = [
    {"id": "sep-1", "key": "sep", "text": f"scenario:refund {ORDERS['SEP']}"},
    {"id": "sep-2", "key": "sep", "text": "scenario:plain while-parked", "hold_s": 3.0},
    {"id": "sep-4", "key": "sep", "text": f"scenario:refund {ORDERS['SEP4']}"},
    {"id": "sep-3", "key": "sep", "text": "scenario:slow decided-meanwhile", "hold_s": 2.0},
    {
        "key": "sep",
        "approval": {
            "call_id": approval_id("sep-1", job_id=SEPARATE_JOB_ID),
            "decision": "approve",
        },
    },
]
"""The second agent's input: sep-2 comes while sep-1 is parked and is answered; sep-4 parks
beside sep-1 and is never decided; sep-1's decision comes while sep-3's (1 s) model call
runs, so sep-1 goes on once sep-3 ends."""


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Run the job once; return what it emitted and the stub's wire log."""
    root = tmp_path_factory.mktemp("approvals-e2e")
    script = GeminiScript()
    ok = StubReply(b"", headers={})
    with LoopbackStubServer(script) as stub, LoopbackStubServer(lambda _r: ok) as collector:
        env = scripted_environment()
        config = AgentConfig(
            job_id=JOB_ID,
            model=stub_gemini(stub.url),
            tools=[
                ToolRef(ref="e2e_tools:refund_order", approval="required"),
                ToolRef(ref="e2e_tools:cancel_order", approval="required", approval_timeout_s=2),
                "e2e_tools:lookup_city",
            ],
            approval_timeout_s=600,
            budgets=Budgets(run_timeout_s=RUN_TIMEOUT_S),
            max_in_flight=8,
            max_inputs_per_parked_key=2,
            media_store=str(root / "media"),
            telemetry=TelemetryConfig(otlp_endpoint=collector.url),
        )
        separate = config.model_copy(
            update={
                "job_id": SEPARATE_JOB_ID,
                "while_parked": "separate_run",
                "max_inputs_per_parked_key": 4,
                "telemetry": None,
            }
        )
        tagged = None
        for agent, inputs in ((config, INPUTS), (separate, SEPARATE)):
            lines = [json.dumps(r) for r in inputs]
            records = env.from_collection(lines, type_info=Types.STRING()).map(
                e2e_tools.hold, Types.STRING()
            )
            streams = agent_stream(records, agent)
            kinds = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
                streams.events.map(lambda s: ("event", s), Types.PICKLED_BYTE_ARRAY()),
                streams.dead_letters.map(lambda s: ("dead", s), Types.PICKLED_BYTE_ARRAY()),
                streams.approval_requests.map(lambda s: ("ask", s), Types.PICKLED_BYTE_ARRAY()),
            )
            tagged = kinds if tagged is None else tagged.union(kinds)
        assert tagged is not None
        with tagged.execute_and_collect(JOB_ID) as results:
            emitted = [(kind, json.loads(text)) for kind, text in results]
        spans = received_spans(collector, JOB_ID)
    found: dict[str, list[dict[str, Any]]] = {"output": [], "event": [], "dead": [], "ask": []}
    for kind, record in emitted:
        found[kind].append(record)
    order = [r["id"] for k, r in emitted if k == "output"]
    return {**found, "order": order, "script": script, "spans": spans}


def output_of(job: Any, input_id: str) -> dict[str, Any]:
    [found] = [o for o in job["output"] if o["id"] == input_id]
    return found


def events_of(
    job: Any, input_id: str, event_type: str, job_id: str = JOB_ID
) -> list[dict[str, Any]]:
    run_id = run_id_for(job_id, input_id)
    return [e for e in job["event"] if e["run_id"] == run_id and e["event_type"] == event_type]


def results_sent(job: Any, order: str) -> list[dict[str, Any]]:
    """The function responses the model received after the parked turn of `order`."""
    [after] = [t for t in job["script"].turns if t.scenario.endswith(order) and t.step == 1]
    return list(function_responses(after.body))


def test_every_input_has_one_output_and_each_parked_call_one_request(job: Any) -> None:
    expected = [r["id"] for r in [*INPUTS, *SEPARATE] if "id" in r and r["id"] not in REFUSED]
    assert Counter(job["order"]) == Counter(expected)
    asks = {a["input_id"]: a for a in job["ask"]}
    assert sorted(asks) == ["ap-1", "ed-1", "end-1", "mx-1", "rj-1", "sep-1", "sep-4", "to-1"]
    assert asks["ap-1"]["call_id"] == approval_id("ap-1")
    assert asks["ap-1"]["arguments"] == {"order": ORDERS["AP"], "amount": 30}
    assert asks["to-1"]["deadline_ms"] - asks["to-1"]["requested_ms"] == 2000


def test_an_approved_call_runs_once_after_the_decision(job: Any) -> None:
    assert refunds_made(ORDERS["AP"]) == [30]
    output = output_of(job, "ap-1")
    assert (output["status"], output["text"]) == ("ok", "refund handled")
    assert output["latency_ms"] > RUN_TIMEOUT_S * 1000  # parked time is not run time
    [decided] = events_of(job, "ap-1", "approval_decided")
    assert decided["payload"]["attributes"]["by"] == "ana"
    assert "refunded 30" in json.dumps(results_sent(job, ORDERS["AP"]))


def test_a_later_input_of_a_parked_key_waits_for_the_run(job: Any) -> None:
    order = job["order"]
    assert order.index("ap-1") < order.index("ap-2")
    [decided] = events_of(job, "ap-1", "approval_decided")
    [started] = events_of(job, "ap-2", "input")
    assert started["timestamp_ms"] >= decided["timestamp_ms"]


def test_an_input_beyond_the_parked_keys_bound_is_a_dead_letter_with_the_reason(
    job: Any,
) -> None:
    [letter] = [d for d in job["dead"] if d["error_type"] == "ParkedKeyFull"]
    assert (letter["stage"], letter["key"], letter["id"]) == ("queue", "ap", "ap-3")
    assert "max_inputs_per_parked_key=2" in letter["reason"]
    assert json.loads(letter["input"])["text"] == "scenario:plain one-too-many"
    assert not events_of(job, "ap-3", "input")  # no run started for it


def test_with_separate_run_a_parked_keys_input_is_answered_while_the_run_waits(
    job: Any,
) -> None:
    [decided] = events_of(job, "sep-1", "approval_decided", SEPARATE_JOB_ID)
    [answered] = events_of(job, "sep-2", "output", SEPARATE_JOB_ID)
    assert answered["timestamp_ms"] < decided["timestamp_ms"]
    assert job["order"].index("sep-2") < job["order"].index("sep-1")
    assert (output_of(job, "sep-1")["status"], output_of(job, "sep-2")["status"]) == ("ok", "ok")
    assert refunds_made(ORDERS["SEP"]) == [30]
    assert output_of(job, "sep-1")["run_id"] != output_of(job, "sep-2")["run_id"]
    sep_events = [e for e in job["event"] if e["key"] == "sep"]
    assert {e["run_id"] for e in sep_events} == {
        run_id_for(SEPARATE_JOB_ID, input_id) for input_id in ("sep-1", "sep-2", "sep-3", "sep-4")
    }


def test_a_run_decided_while_its_key_runs_another_goes_on_after_that_run(job: Any) -> None:
    [decided] = events_of(job, "sep-1", "approval_decided", SEPARATE_JOB_ID)
    [other] = events_of(job, "sep-3", "output", SEPARATE_JOB_ID)
    [refunded] = events_of(job, "sep-1", "tool_response", SEPARATE_JOB_ID)
    assert decided["timestamp_ms"] < other["timestamp_ms"] <= refunded["timestamp_ms"]
    assert job["order"].index("sep-3") < job["order"].index("sep-1")


def test_the_separate_run_misses_the_parked_turn_which_joins_memory_after_it(job: Any) -> None:
    [separate] = job["script"].turns_of("scenario:plain while-parked")
    assert ORDERS["SEP"] not in json.dumps(separate.body)
    [resumed] = [t for t in job["script"].turns if t.scenario.endswith(ORDERS["SEP"]) and t.step]
    sent = json.dumps(resumed.body)
    parked_turn = sent.index(f"scenario:refund {ORDERS['SEP']}")
    assert sent.index("while-parked") < sent.index("decided-meanwhile") < parked_turn


def test_a_rejected_call_is_not_made_and_the_model_reads_why(job: Any) -> None:
    assert refunds_made(ORDERS["RJ"]) == []
    [result] = results_sent(job, ORDERS["RJ"])
    assert "rejected by bo: outside 30 days" in json.dumps(result)
    assert output_of(job, "rj-1")["status"] == "ok"


def test_edited_arguments_are_used_and_logged_as_edited(job: Any) -> None:
    assert refunds_made(ORDERS["ED"]) == [5]
    [decided] = events_of(job, "ed-1", "approval_decided")
    assert decided["payload"]["attributes"]["edited_arguments"] == "true"
    assert decided["payload"]["tool_calls"][0]["arguments"]["amount"] == 5


def test_a_call_without_a_decision_by_its_deadline_is_rejected_as_timed_out(job: Any) -> None:
    assert refunds_made(ORDERS["TO"]) == []
    assert len(events_of(job, "to-1", "approval_expired")) == 1
    assert "no decision came within 2 s" in json.dumps(results_sent(job, ORDERS["TO"]))
    assert output_of(job, "to-1")["status"] == "ok"


def test_stale_unknown_and_conflicting_decisions_are_dead_letters_duplicates_are_not(
    job: Any,
) -> None:
    letters = [d for d in job["dead"] if d["stage"] == "approval"]
    assert sorted((d["key"], d["error_type"]) for d in letters) == [
        ("ap", "AlreadyDecided"),
        ("rj", "UnknownCall"),
        ("to", "ApprovalExpired"),
    ]
    assert all(json.loads(d["input"])["approval"]["call_id"] for d in letters)


def test_in_a_mixed_turn_the_other_call_runs_before_the_decision(job: Any) -> None:
    assert refunds_made(ORDERS["MX"]) == [30]
    assert [r["name"] for r in results_sent(job, ORDERS["MX"])] == ["refund_order", "lookup_city"]
    responses = events_of(job, "mx-1", "tool_response")
    [decided] = events_of(job, "mx-1", "approval_decided")
    [lookup] = [e for e in responses if e["payload"]["tool_results"][0]["name"] == "lookup_city"]
    assert lookup["timestamp_ms"] < decided["timestamp_ms"]


def test_a_run_parked_when_the_input_ends_is_a_dead_letter_with_its_input(job: Any) -> None:
    assert refunds_made(ORDERS["END"]) == []
    letters = {d["id"]: d for d in job["dead"] if d["error_type"] == "ApprovalPending"}
    assert sorted(letters) == ["end-1", "sep-4"]  # sep-4 was set aside (separate_run)
    assert json.loads(letters["end-1"]["input"])["key"] == "end"
    assert json.loads(letters["sep-4"]["input"])["text"] == f"scenario:refund {ORDERS['SEP4']}"
    assert output_of(job, "end-1")["status"] == "error"
    assert output_of(job, "sep-4")["status"] == "error"
    assert refunds_made(ORDERS["SEP4"]) == []


def test_each_approval_wait_is_a_span_sent_live(job: Any) -> None:
    waits = {
        attributes(s)["streamagents.approval.call_id"]: s
        for s in job["spans"]
        if s.name.startswith("await_approval")
    }
    decisions = {
        input_id: attributes(waits[approval_id(input_id)]).get("streamagents.approval.decision")
        for input_id in ("ap-1", "rj-1", "ed-1", "to-1", "mx-1")
    }
    assert decisions == {
        "ap-1": "approve",
        "rj-1": "reject",
        "ed-1": "approve",
        "to-1": "expired",
        "mx-1": "approve",
    }
    assert attributes(waits[approval_id("to-1")])["streamagents.approval.timed_out"] is True
    assert attributes(waits[approval_id("end-1")])["streamagents.incomplete"] is True
    assert waits[approval_id("ap-1")].name == "await_approval refund_order"
    assert not any("streamagents.approval.by" in attributes(s) for s in waits.values())
