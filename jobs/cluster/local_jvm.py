"""The JVM of `run`'s local mini-cluster, started while the command is still doing Python work.

`streamagents run` spends its first seconds in Python (importing the command line, checking
the spec, building the job graph) and needs PyFlink's gateway JVM only when it builds the
graph; launching that JVM takes about as long again. `start_in_background` starts the
launch on a daemon thread before the command's own imports, so the two overlap: PyFlink
guards its gateway with a lock, so whoever asks for it next waits for this launch, and if
the launch failed (no Java), asks again and gets the error in the usual place.

The JVM runs with its quick compiler only (`quick_compiler`): a local run is short and its
Java side light (the agents' work is Python and network), and the optimising compiler
alone spent about 11 of the example's 44 s of CPU.

PyFlink starts a loopback server for process-mode Python workers whenever a local
environment is created, importing Apache Beam's worker for it (about 1.1 s of CPU on the
client's path to the job); `run`'s jobs run their Python in thread mode, inside the
TaskManager, and never call it, so `start_in_background` tells PyFlink to skip it
(`NO_LOOPBACK_SERVER`).

The tasks' Python (thread mode) is CPython embedded in that same JVM, one interpreter for
every task, started by the first Python operator that opens; each task then imports what
its functions need (PyFlink's operations and Apache Beam, this package's operators, the
provider's SDK): the example's tasks took 1.9-2.9 s from their deployment to their start.
`warm_task_python` starts that interpreter and imports those modules from the client, on
a daemon thread, while the command still builds and submits its job (the JVM's Python
and the command's are two processes, so the work overlaps on two cores): the tasks then
find them imported, and start 0.2-0.7 s after their deployment. It uses Flink's own
choices (the `python` on PATH, many threads in one interpreter), so the tasks' interpreter
is the one they would have made.

This module imports nothing heavy (only PyFlink's gateway module), so that it can run first.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "NO_LOOPBACK_SERVER",
    "QUICK_COMPILER",
    "interpreter_first",
    "quick_compiler",
    "start_in_background",
    "warm_task_python",
]

QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
"""The JVM option that keeps to the C1 compiler: compiled sooner, for a fraction of the
CPU, to code that runs somewhat slower; C2 pays off only in long, Java-heavy runs."""


TASK_OPERATIONS = (
    "pyflink.fn_execution.embedded.operation_utils",
    "pyflink.fn_execution.embedded.operations",
)
"""What PyFlink's thread-mode operators import as they open (Apache Beam comes with them)."""


NO_LOOPBACK_SERVER = ("_python_worker_execution_mode", "process")
"""The environment variable (and value) with which PyFlink's `StreamExecutionEnvironment`
starts no loopback server: process-mode workers, if any, are then started by the JVM."""


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


def quick_compiler(jvm_args: str | None) -> str:
    """`jvm_args` (a `JVM_ARGS` value, which PyFlink passes to the JVM it launches) with
    `QUICK_COMPILER` added, unless it already chooses the JVM's compilers (set
    `JVM_ARGS=-XX:TieredStopAtLevel=4` for a long local run whose Java side is busy)."""
    given = (jvm_args or "").split()
    if any("TieredStopAtLevel" in arg or "TieredCompilation" in arg for arg in given):
        return " ".join(given)
    return " ".join([*given, QUICK_COMPILER])


def _launch() -> None:
    """Launch PyFlink's gateway JVM; a failure is left for the next caller to meet."""
    from pyflink.java_gateway import get_gateway

    try:
        get_gateway()
    except Exception:  # the main thread's own call raises it again
        return


def start_in_background() -> threading.Thread:
    """Put this interpreter first on PATH (see `interpreter_first`), keep the JVM to its
    quick compiler (see `quick_compiler`), skip PyFlink's loopback server unless a worker
    mode is set already (see `NO_LOOPBACK_SERVER`) and start launching the gateway JVM,
    which inherits that environment, on a daemon thread."""
    os.environ["PATH"] = interpreter_first(os.environ.get("PATH"))
    os.environ["JVM_ARGS"] = quick_compiler(os.environ.get("JVM_ARGS"))
    os.environ.setdefault(*NO_LOOPBACK_SERVER)
    launcher = threading.Thread(target=_launch, name="gateway-launch", daemon=True)
    launcher.start()
    return launcher


_IMPORT_EACH = """
import importlib
for _name in {names!r}:
    try:
        importlib.import_module(_name)
    except Exception:
        pass
"""
"""Imports each module named, going on past one that fails (its task reports it)."""


def _warm(modules: Sequence[str]) -> None:
    """Import `modules` in the gateway JVM's embedded Python (see the module docstring); a
    failure is left for the tasks to meet (they import the same modules and report it).

    Through a gateway client of its own: py4j serves each of a client's connections on a
    JVM thread of its own, and PyFlink puts connector jars on the context class loader of
    the JVM thread that served the call. Sharing the command's client, this long call held
    the connection the command had used, so the command's next calls went out on a new one
    (a thread without the jars: the Kafka connector not found, now and then)."""
    from py4j.java_gateway import JavaGateway
    from pyflink.java_gateway import get_gateway

    try:
        own = JavaGateway(gateway_parameters=get_gateway().gateway_parameters)
    except Exception:  # an optimisation only: the tasks import the same modules anyway
        return
    try:
        core = own.jvm.pemja.core
        settings = core.PythonInterpreterConfig
        config = (
            settings.newBuilder()
            .setPythonExec("python")  # Flink's `python.executable` default, found on PATH
            .setExcType(settings.ExecType.MULTI_THREAD)
            .build()
        )
        interpreter = core.PythonInterpreter(config)
        try:
            interpreter.exec(_IMPORT_EACH.format(names=list(modules)))
        finally:
            interpreter.close()
    except Exception:  # as above
        return
    finally:
        own.close()


def warm_task_python(modules: Sequence[str]) -> threading.Thread:
    """Start importing `TASK_OPERATIONS` and `modules` in the Python the local mini-cluster's
    tasks will run in, on a daemon thread (the gateway JVM must be this process's)."""
    warmer = threading.Thread(
        target=_warm, args=([*TASK_OPERATIONS, *modules],), name="task-python-warm", daemon=True
    )
    warmer.start()
    return warmer
