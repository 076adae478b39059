"""Close a Python function whose task ended without closing it.

In thread mode PyFlink 2.3 calls a Python function's `close()` only at the end of bounded
input (the operator's `endInput`); when its task is cancelled or fails, the task's
thread just ends and the function's own threads, files and processes (the engine loop,
the event log's open file, an SDK worker) would stay in the TaskManager, which goes on
serving other jobs and restarts. `TaskWatch`, made on the task thread in `open()`, looks
once a second whether that thread is still there (Linux: `/proc/self/task/<tid>`, with the
name it had, so a reused id does not count) and calls `on_gone` when it is not.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["TaskWatch"]

_LOG = logging.getLogger(__name__)


class TaskWatch:
    """Runs `on_gone` once, on a thread of its own, when the thread that made it has ended
    (unless `stop()` came first); does nothing where threads are not listed under /proc."""

    def __init__(self, on_gone: Callable[[], None], period_s: float = 1.0) -> None:
        self._comm = Path(f"/proc/self/task/{threading.get_native_id()}/comm")
        self._stopped = threading.Event()
        self._name = self._read_name()
        if self._name is not None:
            threading.Thread(
                target=self._watch, args=(on_gone, period_s), name="task-watch", daemon=True
            ).start()

    def _read_name(self) -> str | None:
        try:
            return self._comm.read_text()
        except OSError:
            return None

    def _watch(self, on_gone: Callable[[], None], period_s: float) -> None:
        while not self._stopped.wait(period_s):
            if self._read_name() != self._name:
                _LOG.info("the task thread ended without closing its function; closing it")
                on_gone()
                return

    def stop(self) -> None:
        """Stop watching (the function is being closed the usual way)."""
        self._stopped.set()
