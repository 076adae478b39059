"""`KeyedPort` over PyFlink: keyed state from the runtime context, timers from the context.

State is declared once in `open()` with the same names and types the engine has always
used, so savepoints taken before carry over. Before each element or timer the function
`bind`s the port to that callback's context and key; timer calls then go to that
context's timer service, as a `KeyedProcessFunction` would make them itself.
"""

from __future__ import annotations

from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapState, MapStateDescriptor, ValueState, ValueStateDescriptor

from streamagents.operators.engine.keyed_port import StateKind

__all__ = ["FlinkKeyedPort"]

_TYPES = {
    StateKind.TEXT: Types.STRING(),
    StateKind.BYTES: Types.PICKLED_BYTE_ARRAY(),
    StateKind.INT: Types.LONG(),
}


class FlinkKeyedPort:
    """The engine's port on a PyFlink keyed function's state and timer service."""

    def __init__(self, runtime_context: RuntimeContext) -> None:
        self._context = runtime_context
        self._ctx: Any = None
        self._key: str | None = None

    def bind(self, ctx: KeyedProcessFunction.Context, key: str) -> None:
        """Point the port at the callback being processed (its timer service and key)."""
        self._ctx = ctx
        self._key = key

    def value_state(self, name: str, kind: StateKind) -> ValueState:
        return self._context.get_state(ValueStateDescriptor(name, _TYPES[kind]))

    def map_state(self, name: str, key_kind: StateKind, value_kind: StateKind) -> MapState:
        return self._context.get_map_state(
            MapStateDescriptor(name, _TYPES[key_kind], _TYPES[value_kind])
        )

    def current_key(self) -> str:
        assert self._key is not None
        return self._key

    def now_ms(self) -> int:
        return self._ctx.timer_service().current_processing_time()

    def watermark_ms(self) -> int:
        return self._ctx.timer_service().current_watermark()

    def register_processing_timer(self, timestamp_ms: int) -> None:
        self._ctx.timer_service().register_processing_time_timer(timestamp_ms)

    def delete_processing_timer(self, timestamp_ms: int) -> None:
        self._ctx.timer_service().delete_processing_time_timer(timestamp_ms)

    def register_event_timer(self, timestamp_ms: int) -> None:
        self._ctx.timer_service().register_event_time_timer(timestamp_ms)

    def delete_event_timer(self, timestamp_ms: int) -> None:
        self._ctx.timer_service().delete_event_time_timer(timestamp_ms)
