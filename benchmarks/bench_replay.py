"""`streamagents replay` of 10,000 recorded runs at parallelism 2: wall time and runs/s.

The recorded log is written here as the runtime writes one at `verbose` (schema v8): 10,000
runs over 1,000 keys (10 each, in order), a quarter of them with a recorded `lookup_order`
call and its result. The candidate is the support-tickets example (a copy) with its demo
model — the real google-genai SDK against the scripted stub on 127.0.0.1, 0 ms — and the
recorded tool calls are answered from the recording. The command runs as a user runs it,
in its own process; the figures are its wall time (process start to exit: JVM, job, files)
and the job's own (`replay.json`), and the runs it answered.

Run: `python benchmarks/bench_replay.py [--runs N] [--keys K] [--parallelism P]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.connectors.files import read_jsonl
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage, ToolCall

EXAMPLES = Path(__file__).resolve().parents[1] / "jobs" / "examples"
T0 = 1_796_169_600_000


def recorded_run(number: int, key: str, position: int) -> list[AgentEvent]:
    """The events of one recorded run, as the runtime logs them (the ones a replay reads)."""
    run_id = f"run-bench{number:08d}"
    with_tool = number % 4 == 0
    text = "Where is my order O-6004?" if with_tool else f"Thanks for ticket {number}."
    line = json.dumps({"id": f"T-{number}", "customer": {"id": key}, "text": text})
    at = T0 + number * 10

    def event(kind: str, sequence: int, **payload: object) -> AgentEvent:
        return new_event(
            kind,
            job_id="support-tickets",
            key=key,
            run_id=run_id,
            sequence=sequence,
            timestamp_ms=at + sequence,
            event_id=f"{run_id}.{sequence:04d}",
            **payload,
        )

    events = [
        event(
            "input",
            1,
            messages=[ChatMessage.user(text)],
            input_id=f"T-{number}",
            input_record=line,
            key_sequence=position,
        )
    ]
    if with_tool:
        call = ToolCall(id="c-1", name="lookup_order", arguments={"order_id": "O-6004"})
        result = ChatMessage.tool_result(
            "c-1", "lookup_order", json.dumps({"order_id": "O-6004", "status": "in transit"})
        )
        events += [event("tool_request", 2, tool_calls=[call])]
        events += [event("tool_response", 3, tool_results=[result])]
    answer = ChatMessage(role="assistant", content="recorded answer")
    events.append(event("output", len(events) + 1, messages=[answer], status="ok"))
    return events


def write_log(folder: Path, runs: int, keys: int) -> None:
    """The recorded log: `runs` runs over `keys` keys, each key's runs in order."""
    with EventLogWriter(folder, level="verbose") as writer:
        for number in range(runs):
            writer.write_all(recorded_run(number, f"C-{number % keys:04d}", number // keys))


def main() -> None:
    """Record, replay once, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        shutil.copytree(EXAMPLES, root / "ex", ignore=shutil.ignore_patterns("out", "__pycache__"))
        write_log(root / "log", args.runs, args.keys)
        env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "OPENAI_API_KEY")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        command = [
            str(Path(sys.executable).parent / "streamagents"),
            "replay",
            "--log",
            str(root / "log"),
            "--spec",
            str(root / "ex" / "support_tickets.yaml"),
            "--out",
            str(root / "replay"),
            "--parallelism",
            str(args.parallelism),
        ]
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        if done.returncode != 0:
            sys.exit(f"replay failed ({done.returncode}):\n{done.stderr[-3000:]}")
        manifest = json.loads((root / "replay" / "replay.json").read_text())
        answered = read_jsonl(root / "replay" / "outputs")
    ok = sum(1 for record in answered if record["status"] == "ok")
    print(
        f"{os.cpu_count()} cores, load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {args.runs} runs over {args.keys} keys, "
        f"parallelism {args.parallelism}, demo model (0 ms), a quarter with a recorded tool call"
    )
    print(f"answered         {len(answered)} ({ok} ok)")
    print(f"command wall     {wall:.1f} s   ({len(answered) / wall:.0f} runs/s)")
    job_s = manifest["wall_s"]
    print(f"job (replay.json) {job_s:.1f} s   ({len(answered) / job_s:.0f} runs/s)")


if __name__ == "__main__":
    main()
