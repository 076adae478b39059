"""The agent function's timers, driven without Flink: an idle key keeps none it does not need.

Regression: every run registered a far-future event-time timer (for the end-of-input
drain) that nothing deleted, so each key ever seen kept one in keyed state for good, and
checkpoints grew with the number of keys despite the memory TTL (found by the soak test).
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path
from typing import Any

from doubles import answer, scripted_runtime
from pyflink.datastream.functions import TimeDomain

from streamagents.operators.agent import AgentConfig, MemoryConfig, ModelSpec
from streamagents.operators.flink.agent_function import FAR_FUTURE_MS, AgentFunction


class FakeState:
    """A keyed value state for one key."""

    def __init__(self) -> None:
        self._value: Any = None

    def value(self) -> Any:
        return self._value

    def update(self, value: Any) -> None:
        self._value = value

    def clear(self) -> None:
        self._value = None


class FakeMapState(dict):
    """A keyed map state for one key."""

    def put(self, key: Any, value: Any) -> None:
        self[key] = value

    def remove(self, key: Any) -> None:
        del self[key]


class FakeMetricGroup:
    """Counters and distributions that count nothing."""

    def add_group(self, name: str) -> FakeMetricGroup:
        return self

    def counter(self, name: str) -> Any:
        return self

    def distribution(self, name: str) -> Any:
        return self

    def inc(self, n: int = 1) -> None:
        pass

    def update(self, value: int) -> None:
        pass


class FakeRuntimeContext:
    def get_state(self, descriptor: Any) -> FakeState:
        return FakeState()

    def get_map_state(self, descriptor: Any) -> FakeMapState:
        return FakeMapState()

    def get_metrics_group(self) -> FakeMetricGroup:
        return FakeMetricGroup()


class FakeTimers:
    """One key's timer service and context: the timers it holds, per time domain."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.now_ms = int(time.time() * 1000)
        self.processing: set[int] = set()
        self.event: set[int] = set()
        self.domain = TimeDomain.PROCESSING_TIME

    def timer_service(self) -> FakeTimers:
        return self

    def current_processing_time(self) -> int:
        return self.now_ms

    def register_processing_time_timer(self, ts: int) -> None:
        self.processing.add(ts)

    def delete_processing_time_timer(self, ts: int) -> None:
        self.processing.discard(ts)

    def register_event_time_timer(self, ts: int) -> None:
        self.event.add(ts)

    def delete_event_time_timer(self, ts: int) -> None:
        self.event.discard(ts)

    def get_current_key(self) -> str:
        return self.key

    def time_domain(self) -> TimeDomain:
        return self.domain


def test_a_key_whose_run_ended_holds_no_end_of_input_timer(tmp_path: Path) -> None:
    config = AgentConfig(
        model=ModelSpec(provider="test", model="scripted"),
        media_store=str(tmp_path / "media"),
        memory=MemoryConfig(ttl_seconds=5),
    )
    function = AgentFunction(config, lambda cfg: scripted_runtime(tmp_path, [answer("hi")]))
    function.open(FakeRuntimeContext())
    ctx = FakeTimers("k")
    try:
        line = json.dumps({"id": "a", "key": "k", "text": "hello"})
        started = list(function.process_element(("k", line), ctx))
        assert not [r for r in started if isinstance(r, str)], "no output before the reply"
        assert FAR_FUTURE_MS in ctx.event, "a busy key holds its end-of-input timer"
        concurrent.futures.wait([function._calls["k"].future], timeout=10)
        (poll_at,) = ctx.processing
        ctx.processing.clear()
        emitted = [r for r in function.on_timer(poll_at, ctx) if isinstance(r, str)]
        assert [json.loads(r)["status"] for r in emitted] == ["ok"], emitted
        assert ctx.event == set(), "the idle key still holds a timer that never fires"
        assert ctx.processing == {ctx.now_ms + 5000}, "only the memory cleanup timer is left"
    finally:
        function.close()
