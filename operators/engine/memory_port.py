"""An in-memory `KeyedPort` with Flink's semantics, a manual clock and snapshots.

It stands in for a Flink operator's keyed state backend and timer service when the engine
is driven without a job: a test sets the current key, calls the engine, moves the clock
and fires what is due (`next_due`), ends the input (`end_input`: the watermark rises to
its maximum, pending processing-time timers are dropped), and takes `snapshot()`s that
`restore` turns into a new port, as a checkpoint and a restarted attempt would.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from streamagents.operators.engine.keyed_port import MAX_WATERMARK, StateKind

__all__ = ["DueTimer", "InMemoryKeyedPort", "PortSnapshot"]

MIN_WATERMARK = -(1 << 63)

_KINDS = {StateKind.TEXT: str, StateKind.BYTES: bytes, StateKind.INT: int}


@dataclass(frozen=True, order=True)
class DueTimer:
    """A timer that is due: its timestamp, whether it is an event-time timer, its key."""

    timestamp_ms: int
    event_time: bool
    key: str


@dataclass
class PortSnapshot:
    """Keyed state and timers as a checkpoint holds them."""

    values: dict[tuple[str, str], Any] = field(default_factory=dict)
    maps: dict[tuple[str, str], dict[Any, Any]] = field(default_factory=dict)
    timers: set[DueTimer] = field(default_factory=set)


class _Value:
    """A value state of the port's current key."""

    def __init__(self, port: InMemoryKeyedPort, name: str, kind: StateKind) -> None:
        self._port = port
        self._name = name
        self._type = _KINDS[kind]

    def value(self) -> Any:
        return self._port._values.get((self._name, self._port.current_key()))

    def update(self, value: Any) -> None:
        if not isinstance(value, self._type):
            raise TypeError(f"state {self._name!r} holds {self._type.__name__}, got {value!r}")
        self._port._values[(self._name, self._port.current_key())] = value

    def clear(self) -> None:
        self._port._values.pop((self._name, self._port.current_key()), None)


class _Map:
    """A map state of the port's current key."""

    def __init__(self, port: InMemoryKeyedPort, name: str) -> None:
        self._port = port
        self._name = name

    def _map(self, create: bool = False) -> dict[Any, Any]:
        slot = (self._name, self._port.current_key())
        maps = self._port._maps
        if create:
            return maps.setdefault(slot, {})
        return maps.get(slot, {})

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map(create=True)[key] = value

    def remove(self, key: Any) -> None:
        slot = (self._name, self._port.current_key())
        entries = self._port._maps.get(slot)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del self._port._maps[slot]

    def keys(self) -> Iterator[Any]:
        return iter(list(self._map()))

    def values(self) -> Iterator[Any]:
        return iter(list(self._map().values()))

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._map().items()))

    def is_empty(self) -> bool:
        return not self._map()


class InMemoryKeyedPort:
    """Keyed state in dicts, timers in a set, a clock the caller moves."""

    def __init__(self, now_ms: int = 0, snapshot: PortSnapshot | None = None) -> None:
        taken = copy.deepcopy(snapshot) if snapshot is not None else PortSnapshot()
        self._values = taken.values
        self._maps = taken.maps
        self._timers = taken.timers
        self._queued: list[DueTimer] = sorted(self._timers)
        """The timers in timestamp order (a heap), with deleted ones left until they surface."""
        self._now = now_ms
        self._watermark = MIN_WATERMARK
        self._key: str | None = None

    # -- the port -------------------------------------------------------------------------

    def value_state(self, name: str, kind: StateKind) -> _Value:
        return _Value(self, name, kind)

    def map_state(self, name: str, key_kind: StateKind, value_kind: StateKind) -> _Map:
        return _Map(self, name)

    def current_key(self) -> str:
        if self._key is None:
            raise RuntimeError("no current key: call at(key) first")
        return self._key

    def now_ms(self) -> int:
        return self._now

    def watermark_ms(self) -> int:
        return self._watermark

    def register_processing_timer(self, timestamp_ms: int) -> None:
        self._add(DueTimer(timestamp_ms, False, self.current_key()))

    def delete_processing_timer(self, timestamp_ms: int) -> None:
        self._timers.discard(DueTimer(timestamp_ms, False, self.current_key()))

    def register_event_timer(self, timestamp_ms: int) -> None:
        self._add(DueTimer(timestamp_ms, True, self.current_key()))

    def delete_event_timer(self, timestamp_ms: int) -> None:
        self._timers.discard(DueTimer(timestamp_ms, True, self.current_key()))

    def _add(self, timer: DueTimer) -> None:
        if timer not in self._timers:
            self._timers.add(timer)
            heapq.heappush(self._queued, timer)

    # -- driving it -----------------------------------------------------------------------

    def at(self, key: str) -> InMemoryKeyedPort:
        """Make `key` the current key (as Flink does before an element or a timer)."""
        self._key = key
        return self

    def advance_to(self, now_ms: int) -> None:
        """Move the processing-time clock forward (never back)."""
        self._now = max(self._now, now_ms)

    def end_input(self) -> None:
        """The bounded input has ended: pending processing-time timers are dropped and the
        watermark rises to its maximum (Flink quiesces the processing-time service)."""
        self._timers = {t for t in self._timers if t.event_time}
        self._watermark = MAX_WATERMARK

    @property
    def ended(self) -> bool:
        """Whether `end_input` was called."""
        return self._watermark == MAX_WATERMARK

    def next_due(self) -> DueTimer | None:
        """Remove and return the earliest timer that is due, making its key current; a
        processing-time timer is due at the clock, an event-time one at the watermark."""
        waiting: list[DueTimer] = []  # registered timers passed over: not due yet
        found = None
        while self._queued:
            timer = heapq.heappop(self._queued)
            if timer not in self._timers:
                continue  # deleted
            if timer.event_time:
                due = timer.timestamp_ms <= self._watermark
            else:
                due = not self.ended and timer.timestamp_ms <= self._now
            if due:
                found = timer
                break
            waiting.append(timer)
            if timer.timestamp_ms > max(self._now, self._watermark):
                break  # every later timer is later still
        for timer in waiting:
            heapq.heappush(self._queued, timer)
        if found is None:
            return None
        self._timers.discard(found)
        self._key = found.key
        return found

    def timers(self) -> set[DueTimer]:
        """Every timer still registered."""
        return set(self._timers)

    def keys_with_state(self) -> set[str]:
        """The keys that hold any state or timer."""
        keys = {key for _, key in self._values} | {key for _, key in self._maps}
        return keys | {t.key for t in self._timers}

    def state_of(self, key: str) -> dict[str, Any]:
        """Every state of `key` by name (maps as dicts): for assertions."""
        found: dict[str, Any] = {n: v for (n, k), v in self._values.items() if k == key}
        found.update({n: dict(m) for (n, k), m in self._maps.items() if k == key})
        return found

    def snapshot(self) -> PortSnapshot:
        """A deep copy of the keyed state and timers, as a checkpoint takes them."""
        return copy.deepcopy(PortSnapshot(self._values, self._maps, self._timers))
