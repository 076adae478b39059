"""The engine's window on Flink: keyed state of the current key, timers, clock, watermark.

The engine declares its state through a `KeyedPort` once, when it is built (all of it in
`keyed_state.py`), and its parts read and write it for whichever key the port is on at
that moment, exactly as a Flink `KeyedProcessFunction` does. Two implementations have the
same semantics: `operators.flink.keyed_port.FlinkKeyedPort` (PyFlink's state and timer
service) and `operators.engine.memory_port.InMemoryKeyedPort` (dicts, a manual clock,
snapshots), which the engine's tests drive.

Semantics both keep (Flink's): state and timers belong to the current key; a timer is
identified by (key, domain, timestamp), so registering it twice keeps one; timers are
checkpointed with the state; at the end of a bounded input the watermark rises to its
maximum, so event-time timers fire, while pending processing-time timers are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any, Protocol

__all__ = ["MAX_WATERMARK", "KeyContext", "KeyedPort", "MapState", "StateKind", "ValueState"]

MAX_WATERMARK = (1 << 63) - 1
"""The watermark at the end of a bounded input (Java's `Long.MAX_VALUE`)."""


class StateKind(Enum):
    """What a state holds, so a binding can pick its serializer."""

    TEXT = "text"
    BYTES = "bytes"
    INT = "int"


class ValueState(Protocol):
    """One value of the current key."""

    def value(self) -> Any: ...

    def update(self, value: Any) -> None: ...

    def clear(self) -> None: ...


class MapState(Protocol):
    """A map of the current key."""

    def get(self, key: Any) -> Any: ...

    def put(self, key: Any, value: Any) -> None: ...

    def remove(self, key: Any) -> None: ...

    def keys(self) -> Iterable[Any]: ...

    def values(self) -> Iterable[Any]: ...

    def items(self) -> Iterable[tuple[Any, Any]]: ...

    def is_empty(self) -> bool: ...


class KeyContext(Protocol):
    """The key being processed, its timers and the operator's clocks: what an engine part
    uses of the port besides the state handles `keyed_state.declare` gives it."""

    def current_key(self) -> str:
        """The key whose element or timer is being processed."""
        ...

    def now_ms(self) -> int:
        """The processing time, in milliseconds since the epoch."""
        ...

    def watermark_ms(self) -> int:
        """The current event-time watermark (`MAX_WATERMARK` once the input has ended)."""
        ...

    def register_processing_timer(self, timestamp_ms: int) -> None: ...

    def delete_processing_timer(self, timestamp_ms: int) -> None: ...

    def register_event_timer(self, timestamp_ms: int) -> None: ...

    def delete_event_timer(self, timestamp_ms: int) -> None: ...


class KeyedPort(KeyContext, Protocol):
    """Keyed state and timers of the key being processed, and the operator's clocks."""

    def value_state(self, name: str, kind: StateKind) -> ValueState:
        """Declare (when the engine is built) a value state named `name`."""
        ...

    def map_state(self, name: str, key_kind: StateKind, value_kind: StateKind) -> MapState:
        """Declare (when the engine is built) a map state named `name`."""
        ...
