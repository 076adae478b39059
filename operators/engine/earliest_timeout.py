"""The earliest deadline among a subtask's live calls, without a scan of them all.

Calls whose outcome waits for its timer stay among the live calls, and under a backlog
they pile up: a `min()` over all of them for every input cost a quarter of the task
thread's Python time in a tool-loop run. A heap keeps them in order; an entry whose call
is no longer live is dropped when it reaches the top, and the heap is rebuilt from the
live calls when such entries make up most of it, so its size stays within a small multiple
of theirs.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from typing import Generic, TypeVar

__all__ = ["EarliestTimeout"]

C = TypeVar("C")


class EarliestTimeout(Generic[C]):
    """The earliest deadline of the calls in `live` (a key -> call mapping the caller owns)."""

    def __init__(self, live: Mapping[str, C]) -> None:
        self._live = live
        self._heap: list[tuple[int, int, str, C]] = []
        self._numbers = itertools.count()  # ties never compare keys or calls

    def add(self, key: str, call: C, deadline_ms: int) -> None:
        """Note a call just made live under `key` with its run's deadline."""
        if len(self._heap) > 4 * len(self._live) + 64:
            self._heap = [entry for entry in self._heap if self._live.get(entry[2]) is entry[3]]
            heapq.heapify(self._heap)
        heapq.heappush(self._heap, (deadline_ms, next(self._numbers), key, call))

    def earliest_ms(self) -> int | None:
        """The earliest deadline among the live calls; None when there is none."""
        heap = self._heap
        while heap and self._live.get(heap[0][2]) is not heap[0][3]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def clear(self) -> None:
        """Forget every call."""
        self._heap.clear()
