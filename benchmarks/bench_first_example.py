"""The first example end to end against a bare PyFlink job, alternated in one run.

Each round runs, one after the other, `streamagents run jobs/examples/support_tickets.yaml`
(demo model, a fresh copy of the example so nothing is resumed, no API key in the
environment; its 7 tickets give 5 answers and 2 dead letters) and
`benchmarks/bare_keyed_job.py` (one keyed record through a keyed process function to a
file, on the same local mini-cluster in thread mode), each as a new process, timed from
its start to its exit (the prompt's return; the JVM it started may still be writing its
last log lines, and holds the output open until it is gone: that time is printed too). It
prints every run, the medians and their ratio, the load average before and after, and
the `run` command's own timeline (seconds since its start at which each line appeared).

Run: `python benchmarks/bench_first_example.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from streamagents.connectors.files import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "jobs" / "examples"
BARE_JOB = Path(__file__).resolve().parent / "bare_keyed_job.py"
CLI = str(Path(sys.executable).parent / "streamagents")


def _environment() -> dict[str, str]:
    """This environment without provider API keys (so the example picks its demo model)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "OPENAI_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _timed(command: list[str], cwd: Path) -> tuple[float, float, list[tuple[float, str]]]:
    """Run `command` to its end: seconds until it exited, seconds until its output closed,
    and each output line with the second it appeared."""
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
    if process.returncode != 0:
        raise RuntimeError(f"{command} failed:\n" + "\n".join(line for _, line in lines[-30:]))
    return exited[0] - started, closed, lines


def example_run(scratch: Path) -> tuple[float, float, list[tuple[float, str]]]:
    """`streamagents run` on a fresh copy of the support-tickets example."""
    folder = scratch / "example"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("out", "__pycache__"))
    elapsed, closed, lines = _timed([CLI, "run", str(folder / "support_tickets.yaml")], scratch)
    out = folder / "out" / "support_tickets"
    committed = [len(read_jsonl(out / sink)) for sink in ("answers", "dead_letters")]
    if committed != [5, 2]:
        raise RuntimeError(f"the example committed {committed} answers and dead letters")
    return elapsed, closed, lines


def bare_run(scratch: Path) -> tuple[float, float]:
    """The bare keyed PyFlink job: seconds until it exited and until its output closed."""
    elapsed, closed, _ = _timed([sys.executable, str(BARE_JOB), str(scratch / "bare-out")], scratch)
    return elapsed, closed


def _load() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs, alternated")
    args = parser.parse_args()
    examples: list[float] = []
    bares: list[float] = []
    timeline: list[tuple[float, str]] = []
    print(f"load average before: {_load()}", flush=True)
    for round_number in range(args.rounds):
        with tempfile.TemporaryDirectory() as scratch:
            elapsed, closed, timeline = example_run(Path(scratch))
            examples.append(elapsed)
        with tempfile.TemporaryDirectory() as scratch:
            bare, bare_closed = bare_run(Path(scratch))
            bares.append(bare)
        print(
            f"round {round_number + 1}: example {elapsed:.1f} s (output closed {closed:.1f}), "
            f"bare job {bare:.1f} s (output closed {bare_closed:.1f}): "
            f"{elapsed / bare:.2f}x; load {_load()}",
            flush=True,
        )
    example, bare = statistics.median(examples), statistics.median(bares)
    print(f"median: example {example:.1f} s, bare job {bare:.1f} s: {example / bare:.2f}x")
    print("the last example run's output, seconds since its start:")
    for at_s, line in timeline:
        print(f"  {at_s:5.1f}  {line}")


if __name__ == "__main__":
    main()
