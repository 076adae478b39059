"""`KeyMemory` on the in-memory port: a key's history stored and loaded, read as empty once
it outlived the TTL, and the cleanup timer that takes an expired history out of state."""

from __future__ import annotations

from engine_harness import InMemoryMetricGroup

from streamagents.operators.engine.key_memory import KeyMemory
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.memory_port import DueTimer, InMemoryKeyedPort
from streamagents.operators.engine.metrics import EngineMetrics
from streamagents.serde.messages import ChatMessage

HISTORY = [ChatMessage.user("hi"), ChatMessage(role="assistant", content="hello")]


def memory_on(
    port: InMemoryKeyedPort, ttl_s: float | None = 60.0
) -> tuple[KeyMemory, InMemoryMetricGroup]:
    group = InMemoryMetricGroup()
    return KeyMemory(declare(port).memory, port, ttl_s, EngineMetrics(group)), group


def test_a_stored_history_loads_back_per_key() -> None:
    port = InMemoryKeyedPort()
    memory, _ = memory_on(port)
    port.at("a")
    memory.store(1_000, HISTORY)
    port.at("b")
    assert memory.load(1_000) == []
    port.at("a")
    assert memory.load(2_000) == HISTORY
    restored = InMemoryKeyedPort(snapshot=port.snapshot()).at("a")
    assert memory_on(restored)[0].load(2_000) == HISTORY  # decoded from state, not the cache


def test_an_expired_history_reads_as_empty_and_leaves_state() -> None:
    port = InMemoryKeyedPort().at("k")
    memory, _ = memory_on(port, ttl_s=60.0)
    memory.store(1_000, HISTORY)
    assert memory.load(60_999) == HISTORY
    assert memory.load(61_000) == []
    assert "history" not in port.state_of("k")


def test_without_a_ttl_a_history_never_expires_and_no_timer_is_set() -> None:
    port = InMemoryKeyedPort().at("k")
    memory, _ = memory_on(port, ttl_s=None)
    memory.store(1_000, HISTORY)
    memory.arm_cleanup(1_000, wrote_history=True)
    assert memory.load(10**12) == HISTORY
    assert port.timers() == set()
    assert not memory.clean_up(61_000)


def test_the_cleanup_timer_follows_the_last_write_and_clears_the_expired_history() -> None:
    port = InMemoryKeyedPort().at("k")
    memory, group = memory_on(port, ttl_s=60.0)
    memory.store(1_000, HISTORY)
    memory.arm_cleanup(1_000, wrote_history=True)
    memory.store(5_000, HISTORY)
    memory.arm_cleanup(5_000, wrote_history=True)  # the earlier timer goes
    assert port.timers() == {DueTimer(65_000, False, "k")}
    assert not memory.clean_up(61_000)  # a stale timer of the key does nothing
    assert memory.clean_up(65_000)
    assert port.state_of("k") == {}
    assert group.counter("histories_expired").count == 1


def test_a_run_that_wrote_nothing_sets_the_cleanup_timer_again() -> None:
    port = InMemoryKeyedPort().at("k")
    memory, _ = memory_on(port, ttl_s=60.0)
    memory.store(1_000, HISTORY)
    memory.arm_cleanup(1_000, wrote_history=True)
    port.advance_to(61_000)
    assert port.next_due() == DueTimer(61_000, False, "k")  # fired while the key was busy
    memory.arm_cleanup(70_000, wrote_history=False)
    assert port.timers() == {DueTimer(61_000, False, "k")}


def test_a_key_whose_runs_wrote_no_history_gets_a_cleanup_timer_a_ttl_away() -> None:
    port = InMemoryKeyedPort().at("k")
    memory, group = memory_on(port, ttl_s=60.0)
    memory.arm_cleanup(2_000, wrote_history=False)  # its run failed: no history written
    assert port.timers() == {DueTimer(62_000, False, "k")}
    assert memory.clean_up(62_000)  # so the engine drops the key's numbering then
    assert port.state_of("k") == {}
    assert group.counter("histories_expired").count == 0
