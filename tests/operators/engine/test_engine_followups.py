"""Follow-ups a run scheduled, in the engine without Flink: kept with a timer, run when
due (queued behind the key's run), cancelled by a new input, dead letters at the end."""

from __future__ import annotations

import json
from pathlib import Path

from engine_harness import EngineHarness, harness

from streamagents.operators.agent.config import FollowupConfig
from streamagents.testing import EchoTestModel


def followup_harness(tmp_path: Path, cancel_on_input: bool = True) -> EngineHarness:
    followups = FollowupConfig(enabled=True, cancel_on_input=cancel_on_input)
    return harness(tmp_path, EchoTestModel(), followups=followups)


def test_a_followup_waits_in_state_and_runs_its_note_when_due(tmp_path: Path) -> None:
    h = followup_harness(tmp_path)
    h.send_input("k", "in-1", "followup:120 check the parcel")
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1"]
    assert len(h.port.state_of("k")["followups"]) == 1
    h.advance(120_000)
    h.settle_all()
    (_, followup) = h.outputs()
    assert followup["text"] == "echo: check the parcel"
    assert "followups" not in h.port.state_of("k")


def test_a_due_followup_queues_behind_the_keys_run(tmp_path: Path) -> None:
    h = followup_harness(tmp_path, cancel_on_input=False)
    h.send_input("k", "in-1", "followup:60 later")
    h.settle_all()
    h.advance(57_000)
    h.send_input("k", "in-2", "busy now")  # its call is still out when the follow-up is due
    h.advance(3_000)
    assert len(h.runner.pending) == 1
    assert len(h.port.state_of("k")["queue"]) == 1  # the follow-up's line waits its turn
    h.settle_all()
    assert [o["text"] for o in h.outputs()][1:] == ["echo: busy now", "echo: later"]


def test_a_new_input_cancels_the_keys_waiting_followups(tmp_path: Path) -> None:
    h = followup_harness(tmp_path)
    h.send_input("k", "in-1", "followup:60 later")
    h.settle_all()
    h.send_input("k", "in-2", "I wrote again")
    h.settle_all()
    h.advance(120_000)
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1", "in-2"]


def test_a_followup_still_waiting_at_the_end_of_input_is_a_dead_letter(tmp_path: Path) -> None:
    h = followup_harness(tmp_path)
    h.send_input("k", "in-1", "followup:600 much later")
    h.settle_all()
    h.end_input()
    (letter,) = h.dead_letters()
    assert letter["error_type"] == "FollowupPending"
    assert json.loads(letter["input"])["text"] == "much later"  # send it again as it is
    assert h.port.timers() == set()
