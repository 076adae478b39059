"""`InputEnd` on the in-memory port: the end-of-input hold of a busy key, the phase, and the
drain's looks at increasing far-future timestamps."""

from __future__ import annotations

from streamagents.operators.engine.input_end import FAR_FUTURE_MS, InputEnd, Phase
from streamagents.operators.engine.memory_port import DueTimer, InMemoryKeyedPort


def test_a_busy_key_holds_one_far_future_timer_and_an_idle_one_none() -> None:
    port = InMemoryKeyedPort().at("k")
    end = InputEnd(port)
    end.hold()
    end.hold()
    assert port.timers() == {DueTimer(FAR_FUTURE_MS, True, "k")}
    end.release()
    assert port.timers() == set()


def test_the_hold_fires_only_at_the_end_of_input_and_turns_the_phase_to_draining() -> None:
    port = InMemoryKeyedPort(now_ms=1_000).at("k")
    end = InputEnd(port)
    end.hold()
    port.advance_to(10**15)
    assert port.next_due() is None
    assert end.phase is Phase.RUNNING
    port.end_input()
    timer = port.next_due()
    assert timer == DueTimer(FAR_FUTURE_MS, True, "k")
    end.ended_at(timer.timestamp_ms)
    assert end.phase is Phase.DRAINING


def test_drain_looks_go_to_ever_later_timestamps_across_keys() -> None:
    port = InMemoryKeyedPort()
    end = InputEnd(port)
    end.ended_at(FAR_FUTURE_MS)
    looks = []
    for key in ("a", "b", "a"):
        port.at(key)
        looks.append(end.next_look())
    assert looks == [FAR_FUTURE_MS + 1, FAR_FUTURE_MS + 2, FAR_FUTURE_MS + 3]
    port.end_input()
    fired = [port.next_due(), port.next_due(), port.next_due(), port.next_due()]
    assert [(t.timestamp_ms, t.key) for t in fired if t is not None] == [
        (FAR_FUTURE_MS + 1, "a"),
        (FAR_FUTURE_MS + 2, "b"),
        (FAR_FUTURE_MS + 3, "a"),
    ]
    assert fired[3] is None
