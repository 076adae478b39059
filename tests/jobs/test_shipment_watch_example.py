"""The shipment-watch example: a parcel in transit gets a follow-up whose run finds it
delivered, with the conversation's memory.

The example's spec, tool, demo model (a test double on the loopback stub) and requests are
driven through the agent runtime the way the engine drives them, the follow-up's run
started from the input line the engine builds when it comes due.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from doubles import emitted_json
from example_jobs import EXAMPLES, example_runtime

from streamagents.operators.agent import AgentRuntime, Step
from streamagents.operators.agent.approvals import parse_line
from streamagents.operators.agent.followups import followup_line
from streamagents.operators.agent.records import InputRecord
from streamagents.serde.messages import ChatMessage

REQUESTS = EXAMPLES / "data" / "watch" / "requests" / "requests.jsonl"


def finish(
    runtime: AgentRuntime, line: str, key_field: str, history: list[ChatMessage], now: int
) -> Step:
    """Run one input line to its end, as the engine does."""
    record = parse_line(line, key_field)
    assert isinstance(record, InputRecord)
    step = runtime.start(record, history, now)
    while step.state is not None:
        outcome = asyncio.run(runtime.perform(step.state, history))
        step = runtime.advance(step.state, outcome, now, history)
    assert step.output is not None
    return step


def test_a_parcel_in_transit_is_checked_again_by_a_followup_that_finds_it_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHIPMENT_WATCH_CHECKS", str(tmp_path / "checks"))
    now = int(time.time() * 1000)
    with example_runtime("shipment_watch.yaml", tmp_path, now) as (runtime, loaded):
        key_field = loaded.spec.key
        in_transit, delivered = (
            finish(runtime, line, key_field, [], now) for line in REQUESTS.read_text().splitlines()
        )
        [followup] = in_transit.followups
        assert delivered.followups == []
        assert in_transit.history is not None
        later = followup.due_ms
        runtime.clock_ms = lambda: float(later)
        line = followup_line(followup, key_field)
        again = finish(runtime, line, key_field, in_transit.history, later)
    first = emitted_json(in_transit.output)
    assert "shipment T-4821 is in_transit (Lyon sorting hub" in first["text"]
    assert "I will check again at" in first["text"]
    assert followup.due_ms - now == 30_000 and "T-4821" in followup.note
    assert "shipment T-5077 is delivered" in emitted_json(delivered.output)["text"]
    second = emitted_json(again.output)
    assert second["id"] == f"followup-{followup.id}" and second["key"] == "c-310"
    assert second["status"] == "ok" and again.followups == []
    assert "shipment T-4821 is delivered (front door" in second["text"]
    assert (tmp_path / "checks" / "T-4821.count").read_text() == "2"
