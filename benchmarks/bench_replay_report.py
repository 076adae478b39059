"""`replay-report` on two event logs of N runs each: reading, comparing, writing, one run.

Run: `python benchmarks/bench_replay_report.py [--runs N]`. Both logs are written first
with the real writer (level verbose): runs of 500 keys, each an input, a model call asking
for a tool, the tool's result, a second model call and the output. The candidate's log
differs from the recorded one in a tenth of the answers and a twentieth of the tool
arguments. Prints the seconds of each phase of `run_report`, the report's sizes and the
peak memory of the process; no judge (its time is the judge model's).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.jobs.replay.report import compare, load_runs, summarize, write_report
from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage, ToolCall


def run_events(run: int, candidate: bool) -> list[AgentEvent]:
    """The seven events of one run; the candidate's differ for some runs."""
    key, input_id = f"customer-{run % 500}", f"in-{run:07d}"
    ids = {"job_id": "support-bot", "key": key, "run_id": f"run-{run:08d}"}
    order = str(run + 1) if candidate and run % 20 == 0 else str(run)
    answer = f"Order {run} is on its way and arrives on Friday."
    if candidate and run % 10 == 0:
        answer = f"Your order {run} ships today; expect it on Friday."
    call = ToolCall(id=f"call-{run}", name="lookup_order", arguments={"order_id": order})
    usage = TokenUsage(input_tokens=120 + run % 7, output_tokens=30 + (run % 3 if candidate else 0))
    question = ChatMessage(role="user", content=f"Where is my order {run}?")
    steps: list[tuple[str, dict]] = [
        ("input", {"messages": [question], "input_id": input_id}),
        ("chat_request", {"model": "gemini-2.5-flash", "tools": ["lookup_order"]}),
        ("chat_response", {"messages": [ChatMessage(role="assistant", tool_calls=[call])],
                           "usage": usage, "cost_usd": 0.0001}),
        ("tool_request", {"tool_calls": [call]}),
        ("tool_response", {"tool_results": [ChatMessage(role="tool", content="shipped",
                                                        tool_call_id=call.id, name=call.name)]}),
        ("chat_response", {"messages": [ChatMessage(role="assistant", content=answer)],
                           "usage": usage, "cost_usd": 0.0001}),
        ("output", {"messages": [ChatMessage(role="assistant", content=answer)],
                    "input_id": input_id, "status": "ok"}),
    ]  # fmt: skip
    start = 1_790_000_000_000 + run * 10
    return [
        new_event(kind, sequence=n, timestamp_ms=start + n * (400 + run % 50), **ids, **payload)
        for n, (kind, payload) in enumerate(steps, 1)
    ]


def _clocks() -> tuple[float, float]:
    """Wall and CPU time of this process, in seconds."""
    return time.perf_counter(), time.process_time()


def write_log(folder: Path, runs: int, candidate: bool) -> None:
    """One side's event log of `runs` runs."""
    with EventLogWriter(folder, level="verbose") as writer:
        for run in range(runs):
            writer.write_all(run_events(run, candidate))


def main() -> None:
    """Write both logs, time each phase of the report, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_log(root / "recorded", runs, candidate=False)
        write_log(root / "candidate", runs, candidate=True)
        log_bytes = sum(f.stat().st_size for f in root.rglob("*.avro"))
        began = _clocks()
        recorded, candidate = load_runs([root / "recorded"]), load_runs([root / "candidate"])
        loaded = _clocks()
        comparison = compare(recorded, candidate)
        compared = _clocks()
        report = write_report(comparison, root / "report", gates=["changed_answers>5%"])
        written = _clocks()
        sizes = {f.name: f.stat().st_size for f in (root / "report").iterdir()}
    summary = summarize(comparison)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    print(f"machine: {machine}, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}")
    print(f"{runs:,} runs per side, {log_bytes / 2**20:.1f} MiB of logs in all")
    print("phase             wall s   CPU s")
    for name, start, end in (
        ("read both logs", began, loaded),
        ("compare", loaded, compared),
        ("write the report", compared, written),
        ("total", began, written),
    ):
        print(f"{name:16} {end[0] - start[0]:7.2f} {end[1] - start[1]:7.2f}")
    print("differences: " + ", ".join(f"{k} {v}" for k, v in summary["counts"].items()))
    print(f"gates failed: {report.failed_gates}")
    print("report: " + ", ".join(f"{n} {s / 2**20:.1f} MiB" for n, s in sorted(sizes.items())))
    print(f"peak memory (RSS) {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
