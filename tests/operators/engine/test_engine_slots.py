"""When every call slot is held by calls that wait (in a model's admission, say), the task
thread does not wait with them: inputs wait in keyed state and start as slots free."""

from __future__ import annotations

from pathlib import Path

from engine_harness import harness

from streamagents.testing import EchoTestModel


def test_inputs_wait_in_keyed_state_while_every_slot_is_held_and_start_as_slots_free(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel(), max_in_flight=2)
    h.runner.slots_held = True  # the calls in flight wait (a Retry-After pause)
    for key in "abcde":
        h.send_input(key, f"{key}-1", f"hello {key}")
    h.send_input("c", "c-2", "again c")
    # Returned without finishing a call: two run, four inputs wait in their keys' queues.
    assert sorted(c.key for c in h.runner.pending) == ["a", "b"]
    assert h.engine._queue.waiting == 4
    checkpoint = h.checkpoint()  # taken while they wait: the waiting inputs are in it
    h.advance(5000)
    assert h.outputs() == []  # the timers looked, found no slot, and look again later
    h.runner.slots_held = False
    h.settle_all()
    h.advance(5000)
    answered = [o["id"] for o in h.outputs()]
    assert sorted(answered) == ["a-1", "b-1", "c-1", "c-2", "d-1", "e-1"]
    assert answered.index("c-1") < answered.index("c-2")  # a key's order is kept
    assert h.dead_letters() == []

    h.restore(checkpoint)  # fail over: the waiting inputs come back with their timers
    h.settle_all()
    h.advance(5000)
    assert sorted(o["id"] for o in h.outputs()) == ["a-1", "b-1", "c-1", "c-2", "d-1", "e-1"]
    assert h.dead_letters() == []


def test_at_the_bound_of_waiting_inputs_the_task_thread_waits_for_a_slot(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), max_in_flight=1, max_waiting_inputs=1)
    h.send_input("a", "a-1", "one")
    h.runner.slots_held = True
    h.send_input("b", "b-1", "two")  # waits in keyed state: one may
    assert h.engine._queue.waiting == 1
    h.runner.slots_held = False
    h.send_input("c", "c-1", "three")  # the bound is reached: the task thread waits (backpressure)
    assert [c.key for c in h.runner.pending] == ["c"]
    h.settle_all()
    h.advance(5000)
    assert sorted(o["id"] for o in h.outputs()) == ["a-1", "b-1", "c-1"]


def test_a_hot_keys_inputs_wait_within_the_bound_and_are_answered_in_order(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel(), max_in_flight=4, max_waiting_inputs=2)
    peak = 0
    for n in range(6):  # all behind the hot key's run: at the bound, its call is settled
        h.send_input("hot", f"hot-{n}", f"h{n}")
        peak = max(peak, h.engine._queue.waiting)
    assert peak == 2
    h.settle_all()
    assert [o["id"] for o in h.outputs()] == [f"hot-{n}" for n in range(6)]


def test_an_input_replayed_behind_a_restored_run_is_counted_once(tmp_path: Path) -> None:
    """An input the source sends again after a restore, for a key whose restored run has
    not resumed yet, is counted once as waiting: once all is answered no input counts as
    waiting (`run` and `submit --wait` end a held bounded input when no subtask has one)."""
    h = harness(tmp_path, EchoTestModel(), max_in_flight=2)
    h.send_input("a", "a-1", "one")  # runs
    h.send_input("a", "a-2", "two")  # waits behind a's run
    checkpoint = h.checkpoint()
    h.send_input("a", "a-3", "three")  # after the checkpoint: the source sends it again
    h.restore(checkpoint)  # a-3 is replayed before a's restored run resumes
    h.settle_all()
    h.advance(5000)
    assert [o["id"] for o in h.outputs()] == ["a-1", "a-2", "a-3"]
    assert h.engine._queue.waiting == 0
    assert h.metric_group.metrics["waiting_inputs"].count == 0


def test_a_restored_queue_of_inputs_waiting_for_a_slot_is_counted(tmp_path: Path) -> None:
    """Inputs restored while they waited for a call slot count as waiting once their key
    is next touched: when the first starts, the one behind it still counts."""
    h = harness(tmp_path, EchoTestModel(), max_in_flight=1)
    h.runner.slots_held = True
    h.send_input("a", "a-1", "one")  # holds the only slot
    h.send_input("c", "c-1", "two")  # c-1 and c-2 wait for a slot (c has no run)
    h.send_input("c", "c-2", "three")
    assert h.engine._queue.waiting == 2
    h.restore(h.checkpoint())
    h.advance(1000)  # a's run is resumed (its call made again); c finds no slot
    h.complete("a")
    h.advance(1000)  # a's answer frees the slot: c-1 starts
    assert [o["id"] for o in h.outputs()] == ["a-1"]
    assert [c.key for c in h.runner.pending] == ["c"]
    assert h.engine._queue.waiting == 1  # c-2
    h.settle_all()
    h.advance(5000)
    assert [o["id"] for o in h.outputs()] == ["a-1", "c-1", "c-2"]
    assert h.engine._queue.waiting == 0
