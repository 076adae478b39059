"""The engine's runs without Flink: order per key, concurrency, failures, timeouts, restores,
the end of input and memory expiry, driven through the in-memory port."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine_harness import T0, harness

from streamagents.operators.agent import tool
from streamagents.operators.agent.config import Budgets, MemoryConfig
from streamagents.operators.engine.input_end import FAR_FUTURE_MS
from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.messages import ChatMessage
from streamagents.testing import EchoTestModel


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: Order number.
    """
    return f"{order} delivered"


def test_inputs_of_one_key_run_one_at_a_time_in_arrival_order(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    for n in range(3):
        h.send_input("k", f"in-{n}", f"hello {n}")
    assert len(h.runner.pending) == 1  # one run per key: the others wait in its queue
    assert h.engine._queue.waiting == 2
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-0", "in-1", "in-2"]
    assert [o["text"] for o in h.outputs()] == ["echo: hello 0", "echo: hello 1", "echo: hello 2"]
    assert h.engine._queue.waiting == 0


def test_keys_run_concurrently_up_to_max_in_flight(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), max_in_flight=3)
    for key in "abc":
        h.send_input(key, f"in-{key}", "hi")
    assert sorted(c.key for c in h.runner.pending) == ["a", "b", "c"]
    h.send_input("d", "in-d", "hi")  # no slot: the task thread waits for one (the oldest ends)
    assert len(h.runner.pending) == 3
    h.settle_all()
    assert sorted(o["id"] for o in h.outputs()) == ["in-a", "in-b", "in-c", "in-d"]


def test_a_call_outcome_is_applied_on_the_keys_timer_not_before(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    h.send_input("k", "in-1", "hi")
    h.complete("k")
    assert h.outputs() == []  # the result waits for the key's poll timer
    h.advance(1000)
    assert [o["id"] for o in h.outputs()] == ["in-1"]


def test_a_failing_call_dead_letters_its_run_and_the_next_input_runs(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    h.send_input("k", "in-1", "first")
    h.send_input("k", "in-2", "second")
    h.fail("k", RuntimeError("the step broke"))
    h.settle_all()
    (letter,) = h.dead_letters()
    assert (letter["id"], letter["stage"], letter["error_type"]) == ("in-1", "run", "RuntimeError")
    assert json.loads(letter["input"])["text"] == "first"
    assert [o["id"] for o in h.outputs()] == ["in-2"]
    assert h.count("runs_failed") == 1


def test_a_malformed_queued_line_is_a_dead_letter_and_the_queue_goes_on(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    h.send_input("k", "in-1", "first")
    h.send("k", '{"id": "in-2", "key": "k", "text": ')
    h.send_input("k", "in-3", "third")
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1", "in-3"]
    (letter,) = h.dead_letters()
    assert letter["input"] == '{"id": "in-2", "key": "k", "text": '


def test_a_call_past_its_run_timeout_ends_the_run_with_an_error_output(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), budgets=Budgets(run_timeout_s=10))
    h.send_input("k", "in-1", "slow")
    h.send_input("k", "in-2", "next")
    for _ in range(20):  # the call never finishes
        h.advance(1000)
    (first,) = h.outputs()
    assert (first["id"], first["status"]) == ("in-1", "error")
    assert (first["error"]["type"], first["error"]["budget"]) == ("BudgetExceeded", "run_timeout_s")
    assert [c.key for c in h.runner.pending] == ["k"]  # the next input's call went out
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1", "in-2"]


def test_tool_calls_run_between_model_calls_of_one_run(tmp_path: Path) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model, tools=[lookup])
    h.send_input("k", "in-1", "tool:lookup A1")
    h.settle_all()
    (output,) = h.outputs()
    assert output["text"] == "done: A1 delivered"
    assert (output["model_calls"], output["tool_calls"]) == (2, 1)
    assert h.runner.submitted == 3  # model, tool, model: each its own call on the loop


def test_a_restored_run_performs_its_action_again_and_answers_once(tmp_path: Path) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model)
    h.send_input("k", "in-1", "before")
    checkpoint = h.checkpoint()  # the run's call is in flight
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1"]
    h.restore(checkpoint)  # the output was not committed: the call is made again
    assert h.outputs() == []
    h.advance(1000)
    assert [c.key for c in h.runner.pending] == ["k"]
    assert h.count("calls_reissued") == 1
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1"]
    assert model.requests == 2  # calls are at-least-once, outputs exactly-once


def test_a_restore_replays_the_inputs_sent_after_the_checkpoint(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    h.send_input("k", "in-1", "one")
    checkpoint = h.checkpoint()
    h.send_input("k", "in-2", "two")  # queued behind in-1
    h.settle_all()
    h.restore(checkpoint)
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == ["in-1", "in-2"]


def test_the_end_of_input_drains_busy_keys_on_event_time_timers(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    for key in "ab":
        h.send_input(key, f"in-{key}-1", "one")
        h.send_input(key, f"in-{key}-2", "two")
    h.end_input()  # processing-time timers are dropped; the far-future timers fire
    assert sorted(o["id"] for o in h.outputs()) == ["in-a-1", "in-a-2", "in-b-1", "in-b-2"]
    assert h.runner.pending == []


def test_an_idle_key_keeps_no_end_of_input_timer(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    h.send_input("k", "in-1", "hi")
    assert any(t.timestamp_ms == FAR_FUTURE_MS for t in h.port.timers())
    h.settle_all()
    assert not any(t.event_time for t in h.port.timers())


def test_an_expired_history_leaves_state_on_its_cleanup_timer(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), memory=MemoryConfig(ttl_seconds=60))
    h.send("k", json.dumps({"key": "k", "text": "no id"}))
    h.settle_all()
    assert set(h.port.state_of("k")) == {"history", "cleanup_at", "inputs_without_id", "key_runs"}
    h.advance(61_000)
    assert h.port.state_of("k") == {}
    assert h.count("histories_expired") == 1
    assert h.port.now_ms() > T0


def test_keys_that_stay_away_leave_no_state_and_no_timer(tmp_path: Path) -> None:
    """Hundreds of keys, several turns each, interleaved and some without ids: once their
    memory expires nothing of any key is left (a value or timer per key would grow state
    with every key ever seen; the soak test sees only gross growth)."""
    h = harness(tmp_path, EchoTestModel(), memory=MemoryConfig(ttl_seconds=5))
    keys = [f"k{i}" for i in range(300)]
    for turn in range(3):
        for key in keys:
            if turn == 1:
                h.send(key, json.dumps({"key": key, "text": "no id"}))
            else:
                h.send_input(key, f"{key}-{turn}", "hi")
        h.settle_all()
    assert h.port.keys_with_state() >= set(keys)
    h.advance(6_000)
    assert h.port.keys_with_state() == set()
    assert h.count("histories_expired") == len(keys)
    assert len(h.outputs()) == 3 * len(keys)


def test_memory_carries_a_keys_conversation_to_its_next_run(tmp_path: Path) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model)
    h.send_input("k", "in-1", "one")
    h.settle_all()
    h.send_input("k", "in-2", "two")
    h.settle_all()
    history = h.engine._memory.load(h.port.at("k").now_ms())
    assert [m.content for m in history] == ["one", "echo: one", "two", "echo: two"]


class SeeingEchoModel(EchoTestModel):
    """Test double: the echo model, keeping the texts of each request's messages."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[str]] = []

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        self.seen.append([m.content for m in messages if m.role != "system"])
        return await super().achat(messages, tools, **options)


def test_a_history_is_sent_within_its_ttl_and_not_after_it(tmp_path: Path) -> None:
    model = SeeingEchoModel()
    h = harness(tmp_path, model, memory=MemoryConfig(ttl_seconds=60))
    h.send_input("k", "in-1", "one")
    h.settle_all()
    h.advance(30_000)
    h.send_input("k", "in-2", "two")
    h.settle_all()
    assert model.seen[-1] == ["one", "echo: one", "two"]
    h.advance(61_000)
    h.send_input("k", "in-3", "three")
    h.settle_all()
    assert model.seen[-1] == ["three"]
    assert h.count("histories_expired") == 1


def test_identical_lines_without_id_are_two_runs_with_distinct_ids(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel())
    line = json.dumps({"key": "twin", "text": "same words"})
    h.send("twin", line)
    h.send("twin", line)
    h.settle_all()
    digest = hashlib.sha256(line.encode()).hexdigest()
    outputs = h.outputs()
    assert [o["id"] for o in outputs] == [f"{digest}-0", f"{digest}-1"]
    assert [o["status"] for o in outputs] == ["ok", "ok"]
    run_ids = {o["run_id"] for o in outputs}
    assert len(run_ids) == 2
    event_ids = [e["event_id"] for e in h.records("events") if e["run_id"] in run_ids]
    assert len(event_ids) == len(set(event_ids)) > 2


def test_a_run_over_its_model_call_budget_ends_with_an_error_naming_it(tmp_path: Path) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model, tools=[lookup], budgets=Budgets(max_model_calls=1))
    h.send_input("k", "in-1", "tool:lookup A1")  # a second model call would read the result
    h.settle_all()
    (output,) = h.outputs()
    assert output["status"] == "error"
    assert output["error"]["type"] == "BudgetExceeded"
    assert "max_model_calls" in output["error"]["message"]
    assert model.requests == 1
