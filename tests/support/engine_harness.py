"""Drives an `AgentEngine` without Flink: the in-memory port, calls that finish on cue.

`EngineHarness` plays the parts a Flink job plays around the engine: it sets the current
key and hands the engine input lines, moves the processing-time clock and fires what is
due, ends the input, checkpoints (`checkpoint`) and fails over to a new attempt restored
from a checkpoint (`restore`: the in-flight calls are lost, the source replays the lines
sent since the checkpoint, and the transactional sinks drop what was emitted after it).
Calls run on `ManualRunner`, a test double of the engine loop that keeps each call's
coroutine until the test completes or fails it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import ChatModel
from streamagents.operators.agent import AgentRuntime, Outcome
from streamagents.operators.agent.approvals import ApprovalDecision, decision_line
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.operators.engine import (
    AgentEngine,
    Emitter,
    EngineMetrics,
    InMemoryKeyedPort,
    PortSnapshot,
    SideOutputs,
    Timed,
)
from streamagents.operators.engine.engine import DRAIN_WAIT_S
from streamagents.operators.telemetry.live import LiveTelemetry

T0 = 1_000_000
"""The harness clock's start, in milliseconds since the epoch."""

TAGS = SideOutputs(events="events", dead_letters="dead_letters", approval_requests="approvals")


class CountingMetric:
    """An in-memory counter / distribution, as Flink's metric group hands them out."""

    def __init__(self) -> None:
        self.count = 0
        self.values: list[int] = []

    def inc(self, n: int = 1) -> None:
        self.count += n

    def update(self, value: int) -> None:
        self.values.append(value)


class InMemoryMetricGroup:
    """A metric group whose metrics are `CountingMetric`s, by name."""

    def __init__(self) -> None:
        self.metrics: dict[str, CountingMetric] = {}

    def counter(self, name: str) -> CountingMetric:
        return self.metrics.setdefault(name, CountingMetric())

    def distribution(self, name: str) -> CountingMetric:
        return self.metrics.setdefault(name, CountingMetric())


@dataclass
class PendingCall:
    """A call the engine submitted that has not finished."""

    key: str
    coroutine: Awaitable[Outcome]
    future: concurrent.futures.Future[Timed[Outcome]]


class ManualRunner:
    """Test double of `EngineLoop`: a submitted call waits until the test completes or
    fails it; a task-thread wait on a call completes it (the call finished in the wait),
    unless `slots_held` says the calls are waiting (then a wait for a slot finishes none)."""

    def __init__(
        self, max_in_flight: int, key_of: Callable[[], str], clock_s: Callable[[], float]
    ) -> None:
        self.max_in_flight = max_in_flight
        self._key_of = key_of
        self._clock_s = clock_s
        self._loop = asyncio.new_event_loop()
        self._calls: list[PendingCall] = []
        self.submitted = 0
        self.slots_held = False
        """Calls wait (in a model's admission, say): a wait for a slot finishes none."""

    @property
    def pending(self) -> list[PendingCall]:
        """The calls not finished; a call the engine gave up (cancelled) is gone, as the
        engine loop cancels its task."""
        for call in [c for c in self._calls if c.future.cancelled()]:
            self._calls.remove(call)
            call.coroutine.close()  # type: ignore[attr-defined]
        return list(self._calls)

    @property
    def in_flight(self) -> int:
        return len(self.pending)

    def submit(self, coroutine: Awaitable[Outcome]) -> concurrent.futures.Future[Timed[Outcome]]:
        future: concurrent.futures.Future[Timed[Outcome]] = concurrent.futures.Future()
        self._calls.append(PendingCall(self._key_of(), coroutine, future))
        self.submitted += 1
        return future

    def wait_for_slot(self, timeout_s: float | None = None) -> bool:
        if self.slots_held:
            return self.in_flight < self.max_in_flight
        while self.in_flight >= self.max_in_flight:
            self.complete(self.pending[0])
        return True

    def wait(self, future: concurrent.futures.Future[Timed[Outcome]], timeout_s: float) -> None:
        for call in self.pending:
            if call.future is future:
                self.complete(call)
                return

    def of(self, key: str) -> list[PendingCall]:
        """The key's pending calls."""
        return [c for c in self.pending if c.key == key]

    def complete(self, call: PendingCall) -> None:
        """Run the call's coroutine to its end and resolve its future."""
        self._calls.remove(call)
        now = self._clock_s()
        try:
            outcome = self._loop.run_until_complete(call.coroutine)  # type: ignore[arg-type]
        except Exception as error:
            call.future.set_exception(error)
            return
        if not call.future.cancelled():
            call.future.set_result(Timed(outcome, now, self._clock_s()))

    def fail(self, call: PendingCall, error: Exception) -> None:
        """Resolve the call's future with `error` without running it."""
        self._calls.remove(call)
        call.coroutine.close()  # type: ignore[attr-defined]
        call.future.set_exception(error)

    def drop_all(self) -> None:
        """The attempt died: its calls are gone, and so is its loop."""
        for call in self._calls:
            call.coroutine.close()  # type: ignore[attr-defined]
        self._calls.clear()
        self._loop.close()


@dataclass
class Checkpoint:
    """What a checkpoint holds: keyed state and timers, the source offset, the sinks' commit."""

    state: PortSnapshot
    lines_sent: int
    emitted: int


@dataclass
class EngineHarness:
    """One agent operator subtask driven by hand (see the module docstring)."""

    runtime_factory: Callable[[], AgentRuntime]
    config: AgentConfig
    port: InMemoryKeyedPort = field(init=False)
    emitted: list[tuple[str, str]] = field(default_factory=list)
    sent: list[tuple[str, str]] = field(default_factory=list)
    restores: int = 0

    def __post_init__(self) -> None:
        self.port = InMemoryKeyedPort(now_ms=T0)
        self._start()

    def _start(self) -> None:
        self.runtime = self.runtime_factory()
        self.runtime.clock_ms = lambda: float(self.port.now_ms())  # the harness clock
        self.metric_group = InMemoryMetricGroup()
        self.metrics = EngineMetrics(
            self.metric_group, [model.name for model in self.config.model.chain()]
        )
        self.runner = ManualRunner(
            self.config.max_in_flight, lambda: self.port.current_key(), self.clock_s
        )
        telemetry = self.config.telemetry
        self.telemetry = None if telemetry is None else LiveTelemetry(telemetry, self.config.job_id)
        emitter = Emitter(TAGS, self.metrics, None, "standard", self.telemetry, self.config.job_id)
        self.engine = AgentEngine(
            self.port,
            self.config,
            self.runtime,
            self.runner,
            self.metrics,
            emitter,
            self.clock_s,
        )

    def clock_s(self) -> float:
        """The harness's monotonic clock: its processing time, in seconds."""
        return self.port.now_ms() / 1000

    # -- what a job does -------------------------------------------------------------------

    def send(self, key: str, line: str) -> None:
        """An input line of `key` arrives."""
        self.sent.append((key, line))
        self.port.at(key)
        self._collect(self.engine.process_input(line))

    def send_input(self, key: str, input_id: str, text: str) -> None:
        """An input record of `key` arrives."""
        self.send(key, json.dumps({"id": input_id, "key": key, "text": text}))

    def decide(self, key: str, call_id: str, verdict: str = "approve") -> None:
        """A person's decision on `call_id` arrives."""
        self.send(key, decision_line(ApprovalDecision(call_id=call_id, decision=verdict), key))

    def advance(self, ms: int) -> None:
        """Let `ms` of processing time pass, firing the timers that become due."""
        self.port.advance_to(self.port.now_ms() + ms)
        self.fire_due()

    def fire_due(self) -> None:
        """Fire every timer that is due, in timestamp order."""
        while (timer := self.port.next_due()) is not None:
            self._collect(self.engine.on_timer(timer.timestamp_ms, timer.event_time))

    def complete(self, key: str) -> None:
        """The key's call finishes (its outcome waits for the key's next timer)."""
        for call in self.runner.of(key):
            self.runner.complete(call)

    def fail(self, key: str, error: Exception) -> None:
        """The key's call fails with an unexpected error."""
        for call in self.runner.of(key):
            self.runner.fail(call, error)

    def settle_all(self, max_rounds: int = 1000) -> None:
        """Complete every call and fire timers until nothing is in flight."""
        for _ in range(max_rounds):
            for call in list(self.runner.pending):
                self.runner.complete(call)
            self.advance(1000)
            if not self.runner.pending:
                return
        raise AssertionError("calls still in flight after settling")

    def close(self) -> None:
        """The subtask ends: the engine closes, the runner's loop with it, and the live
        telemetry sends what it holds."""
        self.engine.close()
        self.runner.drop_all()
        if self.telemetry is not None:
            self.telemetry.close()
            self.telemetry = None

    def end_input(self) -> None:
        """The bounded input ends: the engine drains every busy key."""
        self.port.end_input()
        self.fire_due()

    def checkpoint(self) -> Checkpoint:
        """Take a checkpoint between two callbacks."""
        return Checkpoint(self.port.snapshot(), len(self.sent), len(self.emitted))

    def restore(self, checkpoint: Checkpoint) -> None:
        """The attempt fails and a new one starts from `checkpoint`: calls are lost, what was
        emitted since is not committed, and the source replays the lines sent since."""
        self.close()
        now = self.port.now_ms()
        self.port = InMemoryKeyedPort(now_ms=now, snapshot=checkpoint.state)
        del self.emitted[checkpoint.emitted :]
        replay = self.sent[checkpoint.lines_sent :]
        del self.sent[checkpoint.lines_sent :]
        self.restores += 1
        self._start()
        for key, line in replay:
            self.send(key, line)

    def _collect(self, emitted: Iterable[Any]) -> None:
        for element in emitted:
            if isinstance(element, tuple):
                self.emitted.append(element)
            else:
                self.emitted.append(("outputs", element))

    # -- what a user sees ------------------------------------------------------------------

    def records(self, channel: str) -> list[dict[str, Any]]:
        """The records emitted on `channel`, parsed."""
        return [json.loads(v) for c, v in self.emitted if c == channel]

    def outputs(self) -> list[dict[str, Any]]:
        return self.records("outputs")

    def dead_letters(self) -> list[dict[str, Any]]:
        return self.records("dead_letters")

    def approval_requests(self) -> list[dict[str, Any]]:
        return self.records("approvals")

    def answered_ids(self) -> list[str]:
        """The input ids that got an output or a dead letter, in emission order."""
        return [r["id"] for r in self.outputs()] + [r["id"] for r in self.dead_letters()]

    def count(self, metric: str) -> int:
        return self.metric_group.counter(metric).count


def harness(
    tmp_path: Path,
    model: ChatModel,
    tools: Sequence[Any] = (),
    parallelism: int = 1,
    spec: ModelSpec | None = None,
    **config: Any,
) -> EngineHarness:
    """A harness over a runtime with `model` (a test double), `tools` and `config`, as one
    of `parallelism` subtasks; `spec` is the model as configured (its name, its prices)."""
    config["model"] = spec or ModelSpec(provider="test", model="engine-harness")
    cfg = AgentConfig(media_store=str(tmp_path / "media"), subtasks=parallelism, **config)

    def runtime() -> AgentRuntime:
        return AgentRuntime(cfg, model, ToolRegistry(list(tools)), MediaStore(cfg.media_store))

    made = EngineHarness(runtime, cfg)
    OPEN.append(made)
    return made


OPEN: list[EngineHarness] = []
"""Harnesses `harness` made and nothing closed yet (the tests' conftest closes them)."""


__all__ = [
    "DRAIN_WAIT_S",
    "OPEN",
    "T0",
    "EngineHarness",
    "ManualRunner",
    "harness",
]
