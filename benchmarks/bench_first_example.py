"""The first example end to end against a bare PyFlink job, alternated in one run.

Each round runs, one after the other, `streamagents run jobs/examples/support_tickets.yaml`
(demo model, a fresh copy of the example so nothing is resumed, no API key in the
environment; its 7 tickets give 5 answers and 2 dead letters) and
`benchmarks/bare_keyed_job.py` (one keyed record through a keyed process function to a
file, on the same local mini-cluster in thread mode), each as a new process, timed from
its start to its exit. It prints every run, the medians and their ratio, and the `run`
command's own timeline (seconds since its start at which each line appeared).

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


def _timed(command: list[str], cwd: Path) -> tuple[float, list[tuple[float, str]]]:
    """Run `command` to its end; seconds it took and each output line with its time."""
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines = [(time.monotonic() - started, line.rstrip()) for line in process.stdout]
    if process.wait() != 0:
        raise RuntimeError(f"{command} failed:\n" + "\n".join(line for _, line in lines[-30:]))
    return time.monotonic() - started, lines


def example_run(scratch: Path) -> tuple[float, list[tuple[float, str]]]:
    """`streamagents run` on a fresh copy of the support-tickets example."""
    folder = scratch / "example"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("out", "__pycache__"))
    elapsed, lines = _timed([CLI, "run", str(folder / "support_tickets.yaml")], scratch)
    out = folder / "out" / "support_tickets"
    committed = [len(read_jsonl(out / sink)) for sink in ("answers", "dead_letters")]
    if committed != [5, 2]:
        raise RuntimeError(f"the example committed {committed} answers and dead letters")
    return elapsed, lines


def bare_run(scratch: Path) -> float:
    """The bare keyed PyFlink job."""
    elapsed, _ = _timed([sys.executable, str(BARE_JOB), str(scratch / "bare-out")], scratch)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs, alternated")
    args = parser.parse_args()
    examples: list[float] = []
    bares: list[float] = []
    timeline: list[tuple[float, str]] = []
    for round_number in range(args.rounds):
        with tempfile.TemporaryDirectory() as scratch:
            elapsed, timeline = example_run(Path(scratch))
            examples.append(elapsed)
        with tempfile.TemporaryDirectory() as scratch:
            bares.append(bare_run(Path(scratch)))
        print(
            f"round {round_number + 1}: example {examples[-1]:.1f} s, bare job {bares[-1]:.1f} s "
            f"({examples[-1] / bares[-1]:.2f}x)",
            flush=True,
        )
    example, bare = statistics.median(examples), statistics.median(bares)
    print(f"median: example {example:.1f} s, bare job {bare:.1f} s: {example / bare:.2f}x")
    print("the last example run's output, seconds since its start:")
    for at_s, line in timeline:
        print(f"  {at_s:5.1f}  {line}")


if __name__ == "__main__":
    main()
