"""The step before every sink that keeps each record within the sink's `max_record_bytes`.

`BoundRecords` maps JSON records (outputs, dead letters, approval requests) through
`RecordOffload.json_record`; `OffloadWorker` is what it and the event-log topic's encoder
share: the media store is made, on a thread of its own (pyarrow must not be called from the
task thread, see `_task_thread_store`), only when a record is over the limit, so records
that fit cost one length check and no thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyflink.datastream import MapFunction, RuntimeContext

from streamagents.connectors.media import MediaStore
from streamagents.connectors.record_offload import RecordOffload, fits
from streamagents.operators.flink._task_watch import TaskWatch

__all__ = ["BoundRecords", "OffloadWorker"]

A = TypeVar("A")
R = TypeVar("R")


class OffloadWorker:
    """A `RecordOffload` for the task thread: it and its thread are made on first use."""

    def __init__(self, media_root: str, max_bytes: int) -> None:
        self.media_root = media_root
        self.max_bytes = max_bytes
        self._offload: RecordOffload | None = None
        self._worker: ThreadPoolExecutor | None = None
        self._watch: TaskWatch | None = None

    def run(self, step: Callable[[RecordOffload, A], R], argument: A) -> R:
        """`step(offload, argument)` on the worker thread; waits for its result."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="streamagents-offload")
            self._watch = TaskWatch(self.close)  # PyFlink calls no close() on cancel or failure
        return self._worker.submit(self._call, step, argument).result()

    def _call(self, step: Callable[[RecordOffload, A], R], argument: A) -> R:
        if self._offload is None:
            self._offload = RecordOffload(MediaStore(self.media_root), self.max_bytes)
        return step(self._offload, argument)

    def close(self) -> None:
        """Stop the worker thread, if one was started."""
        worker, self._worker = self._worker, None
        if worker is not None:
            assert self._watch is not None
            self._watch.stop()
            worker.shutdown(wait=False)


class BoundRecords(MapFunction):
    """Map function: a JSON record as its sink writes it, within `max_bytes` (see
    `RecordOffload`); a record that fits goes through unchanged."""

    def __init__(self, media_root: str, max_bytes: int) -> None:
        self._offload = OffloadWorker(media_root, max_bytes)

    def open(self, runtime_context: RuntimeContext) -> None:
        """Nothing to start: the store and its thread come with the first large record."""

    def close(self) -> None:
        """Stop the offload thread, if a large record started one."""
        self._offload.close()

    def map(self, value: str) -> str:
        """The record itself when it fits, else its bounded form."""
        if fits(value, self._offload.max_bytes):
            return value
        return self._offload.run(RecordOffload.json_record, value)
