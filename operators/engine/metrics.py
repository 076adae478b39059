"""The agent engine's metrics, registered in the operator's Flink metric group.

PyFlink offers counters, gauges, meters and distributions but no histogram, so model
latency is reported twice: as a distribution (`model_latency_ms`: count, min, max, mean
over the job's life) and as percentiles (`model_latency_p50_ms`, `_p95_ms`, `_p99_ms`)
over the last 1024 model calls. Flink counters count whole numbers, so the priced spend
is `cost_microusd`, in millionths of a US dollar.

No metric is a PyFlink gauge: in thread mode a gauge is a Python callable that Flink's
metrics thread calls through pemja whenever the metrics are queried (the web UI, the REST
API), and such calls crashed the JVM (SIGSEGV in `take_gil`) while the task thread ran
Python. Values that go up and down (`in_flight`, `busy_keys`, the percentiles) are
`Level`s instead: counters the task thread moves to the current value.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from streamagents.connectors.providers.circuit_breaker import CircuitBreaker
from streamagents.serde.chat import ChatResponse

__all__ = ["Counter", "EngineMetrics", "Level", "MetricGroup", "UsageTotals", "model_metric"]

_WINDOW = 1024
_EVERY_CALL = 64  # the percentiles follow each of the first 64 model calls,
_REFRESH_EVERY = 16  # then every 16th one (sorting the window takes ~27 us)


class Counter(Protocol):
    """A metric counter (Flink's `Counter`, or an in-memory one in tests)."""

    def inc(self, n: int = 1) -> None: ...


class Distribution(Protocol):
    """A metric distribution (Flink's `Distribution`)."""

    def update(self, value: int) -> None: ...


class MetricGroup(Protocol):
    """Where the engine registers its metrics (Flink's `MetricGroup`)."""

    def counter(self, name: str) -> Counter: ...

    def distribution(self, name: str) -> Distribution: ...


class UsageTotals(NamedTuple):
    """Cumulative calls and tokens of one run, as its state or output reports them."""

    model_calls: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0


class Level:
    """A value that goes up and down, kept in a Flink counter that is moved to it."""

    def __init__(self, counter: Counter) -> None:
        self._counter = counter
        self._value = 0

    def set(self, value: int) -> None:
        """Make the counter show `value`."""
        if value != self._value:
            self._counter.inc(value - self._value)
            self._value = value


def model_metric(model: str) -> str:
    """The name of the counter of calls `model` (`provider/model`) answered: `model_calls_`
    and the name with every character but letters, digits, `-` and `_` made `_`."""
    return "model_calls_" + re.sub(r"[^A-Za-z0-9_-]", "_", model)


class EngineMetrics:
    """Counters and latency figures of one agent operator subtask; `models` are the
    `provider/model` names of its model chain (a counter of the calls each answered)."""

    def __init__(self, group: MetricGroup, models: Iterable[str] = ()) -> None:
        self.runs_started = group.counter("runs_started")
        self.runs_finished = group.counter("runs_finished")
        self.runs_failed = group.counter("runs_failed")
        self.model_calls = group.counter("model_calls")
        self.tool_calls = group.counter("tool_calls")
        self.tokens_in = group.counter("tokens_in")
        self.tokens_out = group.counter("tokens_out")
        self.tokens_cached = group.counter("tokens_cached")
        self.cost_microusd = group.counter("cost_microusd")
        self.calls_unpriced = group.counter("calls_unpriced")
        self.runs_deferred = group.counter("runs_deferred")
        self._microusd_left = 0.0  # the fraction of a millionth not counted yet
        self.dead_letters = group.counter("dead_letters")
        self.calls_reissued = group.counter("calls_reissued")
        self.calls_from_journal = group.counter("calls_from_journal")
        self.call_journal_write_failures = group.counter("call_journal_write_failures")
        self.histories_expired = group.counter("histories_expired")
        self.in_flight = Level(group.counter("in_flight"))
        self.busy_keys = Level(group.counter("busy_keys"))
        self.waiting_inputs = Level(group.counter("waiting_inputs"))
        self.spans_exported = Level(group.counter("spans_exported"))
        self.spans_dropped = Level(group.counter("spans_dropped"))
        self.answered = {name: group.counter(model_metric(name)) for name in models}
        self.failovers = group.counter("failovers")
        self.breakers_opened = Level(group.counter("breakers_opened"))
        self.breakers_closed = Level(group.counter("breakers_closed"))
        self.breakers_open = Level(group.counter("breakers_open"))
        self._latency = group.distribution("model_latency_ms")
        self._recent: deque[int] = deque(maxlen=_WINDOW)
        self._observed = 0
        self._percentiles = [
            (share, Level(group.counter(f"model_latency_{name}_ms")))
            for name, share in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
        ]

    def model_latency(self, milliseconds: float) -> None:
        """Record the wall time of one model call."""
        value = round(milliseconds)
        self._latency.update(value)
        self._recent.append(value)
        self._observed += 1
        if self._observed > _EVERY_CALL and self._observed % _REFRESH_EVERY:
            return
        recent = sorted(self._recent)
        for share, level in self._percentiles:
            level.set(recent[min(len(recent) - 1, int(share * len(recent)))])

    def model_answered(self, response: ChatResponse, default: str) -> None:
        """Count a reply against the model that gave it (`default`: a single model's), and
        as a failover when a fallback gave it."""
        answered = response.answered_by
        counter = self.answered.get(default if answered is None else answered.name)
        if counter is not None:
            counter.inc()
        if answered is not None and answered.fallback:
            self.failovers.inc()

    def breakers(self, breakers: Mapping[str, CircuitBreaker]) -> None:
        """Move the breaker levels to the chain's breakers: times opened and closed, open now."""
        found = list(breakers.values())
        self.breakers_opened.set(sum(b.changes["open"] for b in found))
        self.breakers_closed.set(sum(b.changes["closed"] for b in found))
        self.breakers_open.set(sum(b.state == "open" for b in found))

    def usage(self, before: UsageTotals, after: UsageTotals) -> None:
        """Count the calls, tokens and priced dollars (in millionths) a run consumed between
        two of its snapshots."""
        model_calls, tool_calls, tokens_in, tokens_out, tokens_cached = (
            max(0, a - b) for a, b in zip(after[:5], before[:5], strict=True)
        )
        if after.cost_usd > before.cost_usd:
            microusd = (after.cost_usd - before.cost_usd) * 1_000_000 + self._microusd_left
            self.cost_microusd.inc(int(microusd))
            self._microusd_left = microusd - int(microusd)
        if after.unpriced_calls > before.unpriced_calls:
            self.calls_unpriced.inc(after.unpriced_calls - before.unpriced_calls)
        if model_calls:
            self.model_calls.inc(model_calls)
        if tool_calls:
            self.tool_calls.inc(tool_calls)
        if tokens_in:
            self.tokens_in.inc(tokens_in)
        if tokens_out:
            self.tokens_out.inc(tokens_out)
        if tokens_cached:
            self.tokens_cached.inc(tokens_cached)
