"""Scheduled follow-ups end to end: one mini-cluster job where follow-ups fire with no new
input, wait behind a busy key's run, are cancelled by a new input, and end as dead letters
when the bounded input ends before they are due.

A last input held back for a few seconds keeps the input open while the short follow-ups
come due. The tests below each check one promised behaviour on what the job emitted and
what the stub received.
"""

from __future__ import annotations

import json
from typing import Any

import e2e_tools
import pytest
from doubles import GeminiScript, texts
from pyflink.common import Types
from scripted_job import scripted_environment, stub_gemini

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.operators.agent import AgentConfig
from streamagents.operators.agent.config import FollowupConfig
from streamagents.operators.agent.records import parse_input
from streamagents.operators.agent.run_state import run_id_for
from streamagents.operators.flink import agent_stream

pytestmark = pytest.mark.e2e

JOB_ID = "followups-e2e"
INPUTS = [
    {"id": "fu-1", "key": "fu", "text": "scenario:followup 1 plain fu"},
    {"id": "bz-1", "key": "bz", "text": "scenario:followup 1 slow a, 1.3 plain b"},
    {"id": "cx-1", "key": "cx", "text": "scenario:followup 2 plain cx"},
    {"id": "cx-2", "key": "cx", "text": "scenario:plain again"},
    {"id": "end-1", "key": "end", "text": "scenario:followup 600 plain end"},
    {"id": "last-1", "key": "last", "text": "scenario:plain last", "hold_s": 5.0},
]


def followup_id(input_id: str, call_index: int = 0) -> str:
    """The id of a follow-up scheduled by a call of a run's first turn (its tool_request)."""
    return f"{run_id_for(JOB_ID, input_id)}.{4 + call_index:04d}"


@pytest.fixture(scope="module")
def job() -> Any:
    """Run the job once; return what it emitted and the stub's wire log."""
    script = GeminiScript()
    with LoopbackStubServer(script) as stub:
        env = scripted_environment()
        config = AgentConfig(
            job_id=JOB_ID,
            model=stub_gemini(stub.url),
            followups=FollowupConfig(enabled=True, min_delay_s=0.5, max_pending=3),
            max_in_flight=8,
        )
        records = env.from_collection(
            [json.dumps(r) for r in INPUTS], type_info=Types.STRING()
        ).map(e2e_tools.hold, Types.STRING())
        streams = agent_stream(records, config)
        tagged = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
            streams.events.map(lambda s: ("event", s), Types.PICKLED_BYTE_ARRAY()),
            streams.dead_letters.map(lambda s: ("dead", s), Types.PICKLED_BYTE_ARRAY()),
        )
        with tagged.execute_and_collect(JOB_ID) as results:
            emitted = [(kind, json.loads(text)) for kind, text in results]
    found: dict[str, list[dict[str, Any]]] = {"output": [], "event": [], "dead": []}
    for kind, record in emitted:
        found[kind].append(record)
    return {**found, "script": script}


def output_of(job: Any, input_id: str) -> dict[str, Any]:
    [found] = [o for o in job["output"] if o["id"] == input_id]
    return found


def events_of(job: Any, input_id: str, event_type: str) -> list[dict[str, Any]]:
    run_id = run_id_for(JOB_ID, input_id)
    return [e for e in job["event"] if e["run_id"] == run_id and e["event_type"] == event_type]


def test_a_followup_fires_after_its_delay_with_no_new_input_and_the_keys_memory(
    job: Any,
) -> None:
    fired_id = "followup-" + followup_id("fu-1")
    output = output_of(job, fired_id)
    assert (output["key"], output["text"]) == ("fu", "ok fired-fu")
    [scheduled] = events_of(job, "fu-1", "followup_scheduled")
    [fired] = events_of(job, fired_id, "followup_fired")
    assert fired["timestamp_ms"] >= scheduled["timestamp_ms"] + 1000
    assert fired["payload"]["attributes"]["scheduled_by"] == run_id_for(JOB_ID, "fu-1")
    [turn] = job["script"].turns_of("scenario:plain fired-fu")
    said = [t for content in turn.body["contents"] for t in texts(content)]
    assert said[0] == "scenario:followup 1 plain fu"  # the key's history came along


def test_a_followup_due_while_the_key_is_busy_waits_for_its_run(job: Any) -> None:
    slow = "followup-" + followup_id("bz-1", 0)
    plain = "followup-" + followup_id("bz-1", 1)
    assert output_of(job, slow)["text"] == "slow fired-a"
    assert output_of(job, plain)["text"] == "ok fired-b"
    [slow_done] = [e for e in events_of(job, slow, "output")]
    [plain_started] = events_of(job, plain, "input")
    assert plain_started["timestamp_ms"] >= slow_done["timestamp_ms"]


def test_a_new_input_cancels_the_keys_waiting_followup(job: Any) -> None:
    assert output_of(job, "cx-2")["status"] == "ok"
    [cancelled] = events_of(job, "cx-2", "followup_cancelled")
    assert cancelled["payload"]["attributes"]["followup_id"] == followup_id("cx-1")
    assert not [o for o in job["output"] if o["key"] == "cx" and o["id"].startswith("followup-")]


def test_a_followup_not_due_when_the_input_ends_is_a_dead_letter_to_send_again(
    job: Any,
) -> None:
    [letter] = [d for d in job["dead"] if d["error_type"] == "FollowupPending"]
    assert (letter["stage"], letter["key"]) == ("followup", "end")
    record = parse_input(letter["input"], "key")
    assert (record.key, record.message.content) == ("end", "scenario:plain fired-end")
    assert record.id == "followup-" + followup_id("end-1")
    assert len(job["dead"]) == 1
    assert output_of(job, "last-1")["status"] == "ok"
