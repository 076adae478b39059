"""The first example end to end against a bare PyFlink job, alternated in one run.

Each round runs, one after the other, `streamagents run jobs/examples/support_tickets.yaml`
(demo model, a fresh copy of the example so nothing is resumed, no API key in the
environment, Python's bytecode cache on; its 7 tickets give 5 answers and 2 dead letters) and
`benchmarks/bare_keyed_job.py` (one keyed record through a keyed process function to a
file, on the same local mini-cluster in thread mode), each as a new process, timed from
its start to its exit (the prompt's return; the JVM it started may still be writing its
last log lines, and holds the output open until it is gone: that time is printed too),
with the CPU it used, the JVM's included (this process adopts the JVM when its parent
exits, and waits for it): on a shared machine the CPU says more than the wall time. It
prints every run, the medians and their ratio, the load average before and after, and
the `run` command's own timeline (seconds since its start at which each line appeared).

Run: `python benchmarks/bench_first_example.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from streamagents.connectors.files import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "jobs" / "examples"
BARE_JOB = Path(__file__).resolve().parent / "bare_keyed_job.py"
CLI = str(Path(sys.executable).parent / "streamagents")
_PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> None:
    """Become the parent of the processes a run leaves behind (the JVM it launched), so
    that their CPU is counted with the run's (Linux only; elsewhere the JVM's is missed)."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _cpu_of_children() -> float:
    """CPU seconds (user and system) of every child waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap() -> None:
    """Wait for every adopted process still running."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


_NOT_PASSED = ("GEMINI_API_KEY", "OPENAI_API_KEY", "PYTHONDONTWRITEBYTECODE")


def _environment() -> dict[str, str]:
    """This environment without provider API keys (so the example picks its demo model)
    and with Python's bytecode cache on, as a user has it (with PYTHONDONTWRITEBYTECODE
    set, both of the example's interpreters compile its modules from source every run)."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class Timed(NamedTuple):
    """One run: seconds until it exited, until its output closed, its CPU seconds (its
    processes' and the JVM's), and each output line with the second it appeared."""

    exited: float
    closed: float
    cpu: float
    lines: list[tuple[float, str]]


def _timed(command: list[str], cwd: Path) -> Timed:
    """Run `command` to its end, and every process it left behind."""
    cpu_before = _cpu_of_children()
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    exited: list[float] = []
    waiter = threading.Thread(target=lambda: (process.wait(), exited.append(time.monotonic())))
    waiter.start()
    assert process.stdout is not None
    lines = [(time.monotonic() - started, line.rstrip()) for line in process.stdout]
    closed = time.monotonic() - started
    waiter.join()
    _reap()
    if process.returncode != 0:
        raise RuntimeError(f"{command} failed:\n" + "\n".join(line for _, line in lines[-30:]))
    return Timed(exited[0] - started, closed, _cpu_of_children() - cpu_before, lines)


def example_run(scratch: Path) -> Timed:
    """`streamagents run` on a fresh copy of the support-tickets example."""
    folder = scratch / "example"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("out", "__pycache__"))
    timed = _timed([CLI, "run", str(folder / "support_tickets.yaml")], scratch)
    out = folder / "out" / "support_tickets"
    committed = [len(read_jsonl(out / sink)) for sink in ("answers", "dead_letters")]
    if committed != [5, 2]:
        raise RuntimeError(f"the example committed {committed} answers and dead letters")
    return timed


def bare_run(scratch: Path) -> Timed:
    """The bare keyed PyFlink job."""
    return _timed([sys.executable, str(BARE_JOB), str(scratch / "bare-out")], scratch)


def _load() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs, alternated")
    args = parser.parse_args()
    _adopt_orphans()
    examples: list[Timed] = []
    bares: list[Timed] = []
    print(f"load average before: {_load()}", flush=True)
    for round_number in range(args.rounds):
        with tempfile.TemporaryDirectory() as scratch:
            example = example_run(Path(scratch))
            examples.append(example)
        with tempfile.TemporaryDirectory() as scratch:
            bare = bare_run(Path(scratch))
            bares.append(bare)
        print(
            f"round {round_number + 1}: example {example.exited:.1f} s (output closed "
            f"{example.closed:.1f}, CPU {example.cpu:.1f} s), bare job {bare.exited:.1f} s "
            f"(output closed {bare.closed:.1f}, CPU {bare.cpu:.1f} s): "
            f"{example.exited / bare.exited:.2f}x; load {_load()}",
            flush=True,
        )
    example_s = statistics.median(run.exited for run in examples)
    bare_s = statistics.median(run.exited for run in bares)
    example_cpu = statistics.median(run.cpu for run in examples)
    bare_cpu = statistics.median(run.cpu for run in bares)
    print(f"median: example {example_s:.1f} s, bare job {bare_s:.1f} s: {example_s / bare_s:.2f}x")
    print(
        f"median CPU: example {example_cpu:.1f} s, bare job {bare_cpu:.1f} s: "
        f"{example_cpu / bare_cpu:.2f}x"
    )
    print("the last example run's output, seconds since its start:")
    for at_s, line in examples[-1].lines:
        print(f"  {at_s:5.1f}  {line}")


if __name__ == "__main__":
    main()
