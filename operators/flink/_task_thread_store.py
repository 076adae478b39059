"""A media store that the Flink task thread may call: its pyarrow calls run on a worker.

In thread mode the task thread is a JVM thread that runs Python under a thread state of
pemja's, one `PyGILState_Ensure` does not know; C extensions that call it while holding
the GIL (pyarrow does, under the media store) deadlock there. Python sees such a thread
as a dummy thread, or as its main thread (the one pemja started the interpreter on).
`TaskThreadStore` hands every call made from one to an ordinary Python thread and waits;
calls from threads Python started (the event loop's, the tools') go straight through. So
the runtime's steps run on the task thread itself, and only the steps that touch the
store (media in an input, a large raw input, a dead letter of one) pay for a hand-over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from streamagents.connectors.media import DEFAULT_OFFLOAD_THRESHOLD, MediaStore
from streamagents.serde.messages import ChatMessage, MediaRef

__all__ = ["TaskThreadStore"]

T = TypeVar("T")


def _started_by_python(thread: threading.Thread) -> bool:
    """Whether `thread` is one Python's `threading` started (not a JVM thread, which Python
    sees as a dummy thread, or as the main thread when pemja started the interpreter on it)."""
    return not isinstance(thread, (threading._DummyThread, threading._MainThread))


class TaskThreadStore(MediaStore):
    """`store`, with the calls made from a thread Python did not start run on `worker`."""

    def __init__(self, store: MediaStore, worker: Executor) -> None:
        # Not MediaStore.__init__: that opens a pyarrow filesystem; `store` has one open.
        self.root = store.root
        self.verify_existing = store.verify_existing
        self._store = store
        self._worker = worker

    def _run(self, function: Callable[..., T], *args: Any) -> T:
        if not _started_by_python(threading.current_thread()):
            return self._worker.submit(function, *args).result()
        return function(*args)

    def put(self, data: bytes, mime_type: str) -> MediaRef:
        """See `MediaStore.put`."""
        return self._run(self._store.put, data, mime_type)

    def get(self, ref: MediaRef) -> bytes:
        """See `MediaStore.get`."""
        return self._run(self._store.get, ref)

    def exists(self, ref: MediaRef) -> bool:
        """See `MediaStore.exists`."""
        return self._run(self._store.exists, ref)

    def offload(
        self, message: ChatMessage, threshold_bytes: int = DEFAULT_OFFLOAD_THRESHOLD
    ) -> ChatMessage:
        """See `MediaStore.offload` (a message with nothing to move never leaves the thread)."""
        if not message.has_media:
            return message
        return self._run(self._store.offload, message, threshold_bytes)
