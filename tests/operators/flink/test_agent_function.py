"""The keyed agent function, driven without a cluster through stand-ins for Flink's context."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from doubles import ScriptedTestModel, answer
from pyflink.datastream.functions import TimeDomain

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import AgentConfig, AgentRuntime, ModelSpec, ToolRegistry
from streamagents.operators.flink.agent_function import DEAD_LETTERS_TAG, AgentFunction


class _Value:
    """Keyed value state of the one key these tests use."""

    def __init__(self) -> None:
        self._value: Any = None

    def value(self) -> Any:
        return self._value

    def update(self, value: Any) -> None:
        self._value = value

    def clear(self) -> None:
        self._value = None


class _Map(dict):
    """Keyed map state of the one key these tests use."""

    def put(self, key: Any, value: Any) -> None:
        self[key] = value

    def remove(self, key: Any) -> None:
        del self[key]


class _Metric:
    def inc(self, n: int = 1) -> None:
        pass

    def update(self, value: int) -> None:
        pass


class _Metrics:
    def add_group(self, name: str) -> _Metrics:
        return self

    def counter(self, name: str) -> _Metric:
        return _Metric()

    def distribution(self, name: str) -> _Metric:
        return _Metric()


class _RuntimeContext:
    def get_state(self, descriptor: Any) -> _Value:
        return _Value()

    def get_map_state(self, descriptor: Any) -> _Map:
        return _Map()

    def get_metrics_group(self) -> _Metrics:
        return _Metrics()


class _Context:
    """Timer service and current key of one key; processing time is the wall clock."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.processing_timers: list[int] = []

    def timer_service(self) -> _Context:
        return self

    def current_processing_time(self) -> int:
        return int(time.time() * 1000)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self.processing_timers.append(timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        pass

    def get_current_key(self) -> str:
        return self.key

    def time_domain(self) -> TimeDomain:
        return TimeDomain.PROCESSING_TIME


class _StepFailsRuntime(AgentRuntime):
    """A runtime whose step after a call fails unexpectedly (a bug, not a model error)."""

    def advance(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the step after the model call failed")


def _step_fails_runtime(config: AgentConfig) -> AgentRuntime:
    model = ScriptedTestModel([answer("never used")])
    return _StepFailsRuntime(config, model, ToolRegistry([]), MediaStore(config.media_store))


def _dead_letters(records: Iterable[Any]) -> list[dict[str, Any]]:
    return [json.loads(r[1]) for r in records if isinstance(r, tuple) and r[0] is DEAD_LETTERS_TAG]


def test_an_abandoned_run_whose_input_went_to_the_store_dead_letters_the_whole_input(
    tmp_path: Path,
) -> None:
    config = AgentConfig(
        model=ModelSpec(provider="test", model="scripted"),
        media_store=str(tmp_path / "media"),
        offload_threshold_bytes=1024,
    )
    raw = json.dumps({"id": "big-1", "key": "k", "text": "describe " + "x" * 5000})
    function = AgentFunction(config, _step_fails_runtime)
    function.open(_RuntimeContext())
    ctx = _Context("k")
    try:
        records = list(function.process_element(("k", raw), ctx))
        deadline = time.monotonic() + 10
        while not _dead_letters(records) and time.monotonic() < deadline:
            time.sleep(0.01)
            records += function.on_timer(ctx.processing_timers[-1], ctx)
    finally:
        function.close()
    [letter] = _dead_letters(records)
    assert (letter["stage"], letter["error_type"]) == ("run", "RuntimeError")
    assert (letter["key"], letter["id"]) == ("k", "big-1")
    assert letter["input"] == raw
