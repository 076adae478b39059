"""`InputQueue` on the in-memory port: per-key arrival order, the subtask's waiting count and
its bound, numbering of id-less inputs and runs, a restored queue counted once."""

from __future__ import annotations

from engine_harness import InMemoryMetricGroup

from streamagents.operators.agent.config import InputLimits
from streamagents.operators.agent.records import parse_input
from streamagents.operators.engine.input_queue import InputQueue
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.memory_port import InMemoryKeyedPort
from streamagents.operators.engine.metrics import EngineMetrics


def queue_on(port: InMemoryKeyedPort, max_waiting: int = 3) -> InputQueue:
    metrics = EngineMetrics(InMemoryMetricGroup())
    return InputQueue(declare(port).queue, port, max_waiting, metrics)


def test_each_key_takes_its_lines_back_in_arrival_order() -> None:
    port = InMemoryKeyedPort()
    queue = queue_on(port, max_waiting=10)
    for key, line in [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2"), ("a", "a3")]:
        port.at(key)
        queue.push(line)
    port.at("a")
    assert (queue.length(), queue.has_lines()) == (3, True)
    assert [queue.pop(), queue.pop()] == ["a1", "a2"]
    port.at("b")
    assert [queue.pop(), queue.pop(), queue.pop()] == ["b1", "b2", None]
    assert not queue.has_lines()
    port.at("a")
    assert [queue.pop(), queue.pop()] == ["a3", None]


def test_an_emptied_queue_leaves_no_state() -> None:
    port = InMemoryKeyedPort().at("k")
    queue = queue_on(port)
    queue.push("x")
    queue.pop()
    assert port.state_of("k") == {}


def test_the_waiting_count_spans_keys_and_says_when_the_bound_is_reached() -> None:
    port = InMemoryKeyedPort()
    queue = queue_on(port, max_waiting=3)
    for key in ("a", "b", "c"):
        assert not queue.full
        port.at(key)
        queue.push(key)
    assert (queue.waiting, queue.full) == (3, True)
    queue.pop()
    assert (queue.waiting, queue.full) == (2, False)


def test_a_restored_queue_is_counted_once_when_its_key_is_touched() -> None:
    port = InMemoryKeyedPort().at("k")
    before = queue_on(port)
    before.push("one")
    before.push("two")
    restored = InMemoryKeyedPort(snapshot=port.snapshot()).at("k")
    queue = queue_on(restored)
    assert queue.waiting == 0  # not seen yet
    queue.count_restored()
    queue.count_restored()
    assert queue.waiting == 2
    queue.push("three")
    assert queue.waiting == 3
    assert [queue.pop(), queue.pop(), queue.pop()] == ["one", "two", "three"]
    assert queue.waiting == 0


def test_inputs_without_an_id_are_numbered_per_key_and_inputs_with_one_are_not() -> None:
    port = InMemoryKeyedPort().at("k")
    queue = queue_on(port)
    limits = InputLimits()
    first = queue.number(parse_input('{"key": "k", "text": "a"}', "key", limits))
    named = queue.number(parse_input('{"id": "i", "key": "k", "text": "b"}', "key", limits))
    second = queue.number(parse_input('{"key": "k", "text": "a"}', "key", limits))
    assert named.id == "i"
    assert first.id != second.id  # the same line, a different position
    replayed = queue_on(InMemoryKeyedPort().at("k"))
    again = replayed.number(parse_input('{"key": "k", "text": "a"}', "key", limits))
    assert again.id == first.id  # a replay from the same state numbers it alike


def test_runs_are_numbered_per_key_until_the_numbering_is_forgotten() -> None:
    port = InMemoryKeyedPort()
    queue = queue_on(port)
    port.at("a")
    assert [queue.next_run(), queue.next_run()] == [0, 1]
    port.at("b")
    assert queue.next_run() == 0
    port.at("a")
    queue.forget_numbering()
    assert queue.next_run() == 0
    assert "inputs_without_id" not in port.state_of("a")
