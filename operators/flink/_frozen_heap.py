"""Keep the objects that live as long as the TaskManager out of Python's full collections.

In thread mode every Python function of a TaskManager shares one interpreter, and its
cyclic garbage collector holds the GIL while it runs. A full (generation 2) collection
walks every tracked object, the modules of PyFlink, pydantic, the SDK and ours included
(about 215,000 objects in a TaskManager between jobs): 0.2-0.3 s each, every few
seconds at full speed, up to a tenth of a 0 ms turn's time (`benchmarks/bench_wire.py`,
its `gc ms/turn` column). `freeze_long_lived` moves what is alive once the agent function
has opened into the collector's permanent generation, which collections skip; reference
counting still frees those objects.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_long_lived"]


def freeze_long_lived() -> None:
    """Collect, then exempt every object alive now from later collections.

    What an earlier `open()` froze is released first and collected with the rest, so a
    restarted attempt's dead cycles (its `close()` never ran) do not outlive the restart."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
