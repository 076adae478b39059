"""The JVM of `run`'s local mini-cluster, started while the command is still doing Python work.

`streamagents run` spends its first seconds in Python (importing the command line, checking
the spec, building the job graph) and needs PyFlink's gateway JVM only when it builds the
graph; launching that JVM takes about as long again. `start_in_background` starts the
launch on a daemon thread before the command's own imports, so the two overlap: PyFlink
guards its gateway with a lock, so whoever asks for it next waits for this launch, and if
the launch failed (no Java), asks again and gets the error in the usual place.

This module imports nothing heavy (only PyFlink's gateway module), so that it can run first.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

__all__ = ["interpreter_first", "start_in_background"]


def interpreter_first(path: str | None) -> str:
    """`path` (a PATH value) with this interpreter's directory first, once.

    Flink's thread-mode workers run the `python` they find on PATH, not the interpreter
    that started the job (setting `python.executable` instead fails with "No module named
    'pemja'"): with a venv not activated, they find another Python, or none ("Failed to
    find libpython"). `sys.executable` is not resolved, so a venv's `bin` is what comes
    first, not the base Python its `python` links to."""
    first = str(Path(sys.executable).parent)
    rest = [entry for entry in (path or "").split(os.pathsep) if entry and entry != first]
    return os.pathsep.join([first, *rest])


def _launch() -> None:
    """Launch PyFlink's gateway JVM; a failure is left for the next caller to meet."""
    from pyflink.java_gateway import get_gateway

    try:
        get_gateway()
    except Exception:  # the main thread's own call raises it again
        return


def start_in_background() -> threading.Thread:
    """Put this interpreter first on PATH (see `interpreter_first`) and start launching the
    gateway JVM, which inherits that PATH, on a daemon thread."""
    os.environ["PATH"] = interpreter_first(os.environ.get("PATH"))
    launcher = threading.Thread(target=_launch, name="gateway-launch", daemon=True)
    launcher.start()
    return launcher
