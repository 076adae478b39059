"""Keep the objects that live as long as the TaskManager out of Python's full collections.

In thread mode every Python function of a TaskManager shares one interpreter, and its
cyclic garbage collector holds the GIL while it runs. A full (generation 2) collection
walks every tracked object, the modules of PyFlink, pydantic, the SDK and ours included
(about 215,000 objects in a TaskManager between jobs): 0.2-0.3 s each, every few
seconds at full speed, up to a tenth of a 0 ms turn's time (`benchmarks/bench_wire.py`,
its `gc ms/turn` column). `freeze_long_lived` moves what is alive once the agent function
has opened into the collector's permanent generation, which collections skip; reference
counting still frees those objects. The agent function freezes at the end of a first
attempt's `open()`; a restarted attempt's asks for it (`freeze_soon`) a few seconds later,
on a thread of its own: a restarted job's subtasks then open and make their restored calls
without waiting behind a full collection each (it holds the GIL the loop threads need as
well), and the opens of those seconds share one.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["FREEZE_DELAY_S", "freeze_long_lived", "freeze_soon"]

FREEZE_DELAY_S = 5.0
"""How long after an `open()` the collection and freeze run (`freeze_soon`)."""

_lock = threading.Lock()
_scheduled: threading.Timer | None = None


def freeze_long_lived() -> None:
    """Collect, then exempt every object alive now from later collections.

    What an earlier `open()` froze is released first and collected with the rest, so a
    restarted attempt's dead cycles (its `close()` never ran) do not outlive the restart."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def freeze_soon(delay_s: float = FREEZE_DELAY_S) -> threading.Timer:
    """Run `freeze_long_lived` on a thread of its own `delay_s` from now, unless a run is
    already waiting (it then covers what opens now); returns the timer that will run it."""
    global _scheduled
    with _lock:
        if _scheduled is None or _scheduled.finished.is_set():
            _scheduled = threading.Timer(delay_s, freeze_long_lived)
            _scheduled.name = "freeze-long-lived"
            _scheduled.daemon = True
            _scheduled.start()
        return _scheduled
