"""A key's short-term history in keyed state, and the timer that expires it.

The history is stored as compact bytes (`StoredHistory`) with its write time; a cache of
decoded histories spares the next run of a recent key the decoding. With a memory TTL,
a run that ends sets a processing-time cleanup timer at its history's expiry (the due time
kept in keyed state); when it fires on an idle key whose history has expired, the history
and the key's numbering of id-less inputs leave state. Flink's own state TTL is not used:
building its config needs the Py4J gateway, which a TaskManager's embedded Python lacks.
"""

from __future__ import annotations

import math

from streamagents.operators.agent.memory import history_expired
from streamagents.operators.engine.keyed_port import KeyContext
from streamagents.operators.engine.keyed_state import MemoryState
from streamagents.operators.engine.metrics import EngineMetrics
from streamagents.operators.engine.stored_history import HistoryCache
from streamagents.serde.messages import ChatMessage

__all__ = ["KeyMemory"]


class KeyMemory:
    """Loads, stores and expires the current key's history."""

    def __init__(
        self,
        state: MemoryState,
        port: KeyContext,
        ttl_seconds: float | None,
        metrics: EngineMetrics,
    ) -> None:
        self._port = port
        self._history = state.history
        self._cleanup_at = state.cleanup_at
        self._ttl_s = ttl_seconds
        self._ttl_ms = None if ttl_seconds is None else math.ceil(ttl_seconds * 1000)
        self._metrics = metrics
        self._cache = HistoryCache()

    def load(self, now_ms: int) -> list[ChatMessage]:
        """The key's history; an expired one is dropped from state and reads as empty."""
        stored = self._history.value()
        if stored is None:
            return []
        key = self._port.current_key()
        history = self._cache.decode(key, stored)
        if history_expired(history.updated_ms, now_ms, self._ttl_s):
            self._history.clear()
            self._cache.forget(key)
            return []
        return list(history.messages)

    def store(self, now_ms: int, messages: list[ChatMessage]) -> None:
        """Replace the key's history with `messages`, written at `now_ms`."""
        self._history.update(self._cache.encode(self._port.current_key(), now_ms, messages))

    def arm_cleanup(self, now_ms: int, wrote_history: bool) -> None:
        """After a run: set the cleanup timer at the history's expiry (later if just written);
        a key with no expiry due yet (its runs wrote no history: they failed) gets one a TTL
        from now, so its numbering of runs and id-less inputs leaves state too.

        The timer is set again even when its time is unchanged: one that fired while the
        key was busy did nothing, and the key is now (or soon) idle.
        """
        if self._ttl_ms is None:
            return
        due = self._cleanup_at.value()
        if wrote_history or due is None:
            if due is not None:
                self._port.delete_processing_timer(due)
            due = now_ms + self._ttl_ms
            self._cleanup_at.update(due)
        self._port.register_processing_timer(due)

    def clean_up(self, timestamp: int) -> bool:
        """On the cleanup timer of an idle key (no run, no waiting input): drop its history,
        which has expired; returns whether it did, so the key's count of inputs without an
        id goes too and a key that stays away leaves nothing in state.

        Every history write moves the due time to that write + TTL, so a timer that still
        finds its own time there fires after the history's expiry (no need to decode it).
        """
        if self._ttl_ms is None or self._cleanup_at.value() != timestamp:
            return False
        if self._history.value() is not None:
            self._history.clear()
            self._metrics.histories_expired.inc()
        self._cleanup_at.clear()
        return True
