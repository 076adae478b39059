"""An agent driven through the real engine without Flink: for tests of tools and prompts.

`AgentHarness` runs the same `AgentEngine` a job runs, on `InMemoryKeyedPort` (keyed state
and timers in dicts) with the engine's real loop thread for model and tool calls. `ask`
hands it one input and returns when the input is answered (an output, a dead letter, or
an approval request); `steps` yields each record as the engine emits it (run events,
then the answer). Time the agent only waits (a follow-up due in an hour, an approval's
deadline) passes at once: when no call is in flight, the clock jumps to the next timer.

    config = AgentConfig(model=ModelSpec(provider="test", model="t"),
                         tools=["my_tools:lookup_order"], media_store=str(tmp_path))
    with AgentHarness(config, ScriptedTestModel([calls(("lookup_order", {"order": "A1"})),
                                                 answer("shipped")])) as agent:
        assert agent.ask("where is A1?").text == "shipped"
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from streamagents.connectors.providers import ChatModel
from streamagents.operators.agent import AgentConfig, AgentRuntime
from streamagents.operators.agent.approvals import ApprovalDecision, decision_line
from streamagents.operators.engine import (
    AgentEngine,
    Emitter,
    EngineLoop,
    EngineMetrics,
    InMemoryKeyedPort,
    SideOutputs,
)

if TYPE_CHECKING:
    from streamagents.jobs.spec import LoadedSpec

__all__ = ["AgentHarness", "Answer", "Emitted", "HarnessError"]

CHANNELS = SideOutputs(
    events="events", dead_letters="dead_letters", approval_requests="approval_requests"
)
"""The channel names records are emitted on (the main output is `outputs`)."""


class HarnessError(RuntimeError):
    """The agent cannot answer: it waits for nothing that will come, or took too long."""


@dataclass(frozen=True)
class Emitted:
    """One record the engine emitted: its channel (`outputs`, `dead_letters`,
    `approval_requests`, `events`) and the record as its JSON object."""

    channel: str
    record: dict[str, Any]


@dataclass
class Answer:
    """What one input came to: its output or dead letter, the approval requests it made,
    and every run event the engine emitted on the way."""

    input_id: str
    output: dict[str, Any] | None = None
    dead_letter: dict[str, Any] | None = None
    approval_requests: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer's text; empty when the input got no output."""
        return "" if self.output is None else str(self.output.get("text", ""))

    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls the run made, in order (`name`, `arguments`, `id`)."""
        return self._payload_items("tool_request", "tool_calls")

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results the run got, in order (`name`, `content`, `is_error`)."""
        return self._payload_items("tool_response", "tool_results")

    def _payload_items(self, event_type: str, field_name: str) -> list[dict[str, Any]]:
        return [
            item
            for event in self.events
            if event["event_type"] == event_type
            for item in event["payload"][field_name]
        ]

    def add(self, emitted: Emitted) -> None:
        """Take one emitted record into the answer."""
        if emitted.channel == "events":
            self.events.append(emitted.record)
        elif emitted.channel == "outputs":
            self.output = emitted.record
        elif emitted.channel == "dead_letters":
            self.dead_letter = emitted.record
        else:
            self.approval_requests.append(emitted.record)


class _Metrics:
    """A metric group that keeps nothing: the harness reads records, not metrics."""

    class _Metric:
        def inc(self, n: int = 1) -> None:
            """Count nothing."""

        def update(self, value: int) -> None:
            """Keep nothing."""

    def counter(self, name: str) -> _Metric:
        """A counter that counts nothing."""
        return self._Metric()

    def distribution(self, name: str) -> _Metric:
        """A distribution that keeps nothing."""
        return self._Metric()


class AgentHarness:
    """One agent subtask driven in-process (see the module docstring). `model` replaces the
    config's model (a test model such as `ScriptedTestModel`); without it the config's own
    model is built, as a job builds it. `timeout_s` bounds the real time one input may take."""

    def __init__(
        self, config: AgentConfig, model: ChatModel | None = None, *, timeout_s: float = 60.0
    ) -> None:
        self.config = config
        self.timeout_s = timeout_s
        self._skipped_ms = 0
        self._ids = itertools.count(1)
        self._closers = ExitStack()
        self.runtime = AgentRuntime.from_config(config, model)
        self.runtime.clock_ms = lambda: float(self._now_ms())
        self.port = InMemoryKeyedPort(now_ms=self._now_ms())
        self._loop = EngineLoop(config.max_in_flight, name="streamagents-harness").start()
        metrics = EngineMetrics(_Metrics(), [entry.name for entry in config.model.chain()])
        level = "verbose" if config.event_log_level == "verbose" else "standard"
        emitter = Emitter(CHANNELS, metrics, None, level, None, config.job_id, config.redactor())
        self.engine = AgentEngine(
            self.port, config, self.runtime, self._loop, metrics, emitter, time.monotonic
        )

    @classmethod
    def from_spec(
        cls,
        path: str | Path,
        model: ChatModel | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> AgentHarness:
        """The agent of a YAML job spec, checked as `streamagents validate` checks it (raises
        `SpecError`); its demo model (`provider: demo`) is served on 127.0.0.1 while the
        harness is open. `model` replaces the spec's model."""
        from streamagents.jobs.spec import check_runnable, load_spec

        loaded = load_spec(path, environ)
        check_runnable(loaded)
        return cls.from_loaded(loaded, model, timeout_s=timeout_s)

    @classmethod
    def from_loaded(
        cls, loaded: LoadedSpec, model: ChatModel | None = None, *, timeout_s: float = 60.0
    ) -> AgentHarness:
        """The agent of a spec already loaded and checked (see `from_spec`)."""
        from streamagents.jobs.graph import agent_config
        from streamagents.jobs.model_choice import demo_server, model_spec

        closers = ExitStack()
        try:
            demo_url = closers.enter_context(demo_server(loaded.model))
            config = agent_config(loaded, model_spec(loaded.model, demo_url))
            made = cls(config, model, timeout_s=timeout_s)
        except BaseException:
            closers.close()
            raise
        made._closers.push(closers)
        return made

    # -- asking ----------------------------------------------------------------------------

    def ask(
        self, text: str, *, key: str = "test", input_id: str | None = None, **fields: Any
    ) -> Answer:
        """Hand the agent an input (`text`, its `key`, any pass-through `fields`) and return
        what it came to once it is answered or waits for an approval."""
        line = self.input_line(text, key=key, input_id=input_id, **fields)
        return self.answer(line)

    def input_line(
        self, text: str, *, key: str = "test", input_id: str | None = None, **fields: Any
    ) -> str:
        """The JSON input line `ask` sends: `text`, `key` at the key field unless `fields`
        give it, and a new id unless `input_id` is given."""
        record = {**fields, "id": input_id or f"input-{next(self._ids)}", "text": text}
        *parents, last = self.config.key_field.split(".")
        holder = record
        for name in parents:  # a dotted key field (`customer.id`) is a nested field
            holder = holder.setdefault(name, {})
        holder.setdefault(last, key)
        return json.dumps(record)

    def answer(self, line: str) -> Answer:
        """Send one JSON input line and collect what it came to."""
        found = Answer(self.runtime.parse(line).id)
        for emitted in self.steps(line):
            found.add(emitted)
        return found

    def decide(self, approval_request: Mapping[str, Any], verdict: str = "approve") -> Answer:
        """A person's decision (`approve` or `reject`) on an approval request; returns what
        the parked run then came to."""
        decision = ApprovalDecision(call_id=approval_request["call_id"], decision=verdict)
        found = Answer(str(approval_request["input_id"]))
        line = decision_line(decision, approval_request["key"])
        for emitted in self._drive(approval_request["key"], line, found.input_id):
            found.add(emitted)
        return found

    def steps(self, line: str) -> Iterator[Emitted]:
        """Send one JSON input line and yield each record as the engine emits it, until the
        input has an output, a dead letter or an approval request."""
        record = self.runtime.parse(line)
        yield from self._drive(record.key, line, record.id)

    # -- driving the engine ----------------------------------------------------------------

    def _drive(self, key: str, line: str, input_id: str) -> Iterator[Emitted]:
        """Hand `line` of `key` to the engine, then fire its timers as they fall due, until
        `input_id` has an output, a dead letter or an approval request."""
        give_up = time.monotonic() + self.timeout_s
        self._tick()
        self.port.at(key)
        batch = self._records(self.engine.process_input(line))
        while True:
            answered = False
            for emitted in batch:
                if emitted.channel != "events" and _input_of(emitted) == input_id:
                    answered = True
                yield emitted
            if answered:
                return
            batch = self._next_timer(give_up)

    def _next_timer(self, give_up: float) -> Iterator[Emitted]:
        """Wait for the next timer to fall due and fire it. While no call is in flight,
        the clock jumps to the next timer rather than waiting for it."""
        while True:
            self._tick()
            timer = self.port.next_due()
            if timer is not None:
                return self._records(self.engine.on_timer(timer.timestamp_ms, timer.event_time))
            if self._loop.in_flight == 0:
                waiting = [t.timestamp_ms for t in self.port.timers() if not t.event_time]
                if not waiting:
                    raise HarnessError(
                        "the input was not answered and the agent waits for nothing "
                        "(no call in flight, no timer)"
                    )
                self._skipped_ms += max(0, min(waiting) - self._now_ms())
                continue
            if time.monotonic() > give_up:
                raise HarnessError(f"the input was not answered within {self.timeout_s:g} s")
            time.sleep(0.001)

    def _records(self, emitted: Iterable[Any]) -> Iterator[Emitted]:
        """The engine's emitted elements as `Emitted` records (outputs are bare strings)."""
        for element in emitted:
            channel, text = element if isinstance(element, tuple) else ("outputs", element)
            yield Emitted(channel, json.loads(text))

    def _now_ms(self) -> int:
        """The harness clock: wall time plus the waits it skipped."""
        return int(time.time() * 1000) + self._skipped_ms

    def _tick(self) -> None:
        """Move the port's processing-time clock to the harness clock."""
        self.port.advance_to(self._now_ms())

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Forget the live calls, stop the loop thread and close the model and tools."""
        self.engine.close()
        self._loop.stop(self.runtime.aclose)
        self._closers.close()

    def __enter__(self) -> AgentHarness:
        """The harness, closed when the block ends."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Close the harness."""
        self.close()


def _input_of(emitted: Emitted) -> str | None:
    """The input an output, dead letter or approval request answers."""
    record = emitted.record
    return record.get("input_id") if emitted.channel == "approval_requests" else record.get("id")
