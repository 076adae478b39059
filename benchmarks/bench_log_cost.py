"""What the event log costs the engine per turn, without Flink: log `standard` against `off`.

The agent function's work for a turn, on one thread, as it does it: `AgentRuntime.start` /
`advance` around the test double of `bench_wire.py` (0 ms model), and at `standard` the
step's events handed to the event-log sink function it carries (`write_events`). The model
calls run on an event loop between steps and are not counted. CPU time of the thread, so
other work on a shared machine inflates the figures less than wall time; levels and
workloads alternate, and the best of the rounds is kept.

Run: `python benchmarks/bench_log_cost.py [--inputs N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import AgentConfig, AgentRuntime, ModelSpec, ToolRegistry
from streamagents.operators.flink.eventlog_sink import EventLogSinkFunction

sys.path.insert(0, str(Path(__file__).parent))
from bench_wire import TOOL, PingingTestDouble


class _Subtask:
    """The one runtime-context method the sink function asks for."""

    def get_index_of_this_subtask(self) -> int:
        return 0


def turn_cpu_ms(workdir: Path, level: str, tools: bool, inputs: int) -> tuple[float, float]:
    """CPU ms per turn of the steps (and of their event-log writes) for `inputs` inputs."""
    config = AgentConfig(
        job_id="bench",
        model=ModelSpec(provider="test-double", model="bench"),
        media_store=str(workdir / "media"),
        event_log_level=level,
        tools=[TOOL] if tools else [],
    )
    registry = ToolRegistry.from_paths([TOOL] if tools else [], max_workers=4)
    model = PingingTestDouble(9, 0.0)
    runtime = AgentRuntime(config, model, registry, MediaStore(config.media_store))
    sink = None
    if level != "off":
        sink = EventLogSinkFunction(str(workdir / f"events-{time.time_ns()}"), level, 1 << 26, 300)
        sink.open(_Subtask())  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    steps = writes = 0.0
    gc.collect()
    for i in range(inputs):
        text = f"where is order O-5521? ({i})" if tools else f"hi {i}"
        raw = json.dumps({"id": f"i{i}", "key": f"k{i % 100}", "text": text})
        started = time.thread_time()
        step = runtime.start(runtime.parse(raw), [], int(time.time() * 1000))
        while True:
            written = time.thread_time()
            if sink is not None and step.events:
                sink.write_events(step.events)
            ended = time.thread_time()
            steps += ended - started
            writes += ended - written
            if step.state is None:
                break
            outcome = loop.run_until_complete(runtime.perform(step.state, []))
            started = time.thread_time()
            step = runtime.advance(step.state, outcome, int(time.time() * 1000), [])
    if sink is not None:
        sink.close()
    loop.close()
    return steps * 1000 / inputs, writes * 1000 / inputs


def main() -> None:
    """Print CPU ms per turn at each level, and the log's share, plain turns and tool loop."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--inputs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {args.inputs} inputs "
        f"per run, {args.rounds} rounds (best kept), 0 ms test-double model, no Flink"
    )
    best: dict[tuple[bool, str], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        turn_cpu_ms(workdir, "standard", False, 200)  # warm up imports and caches
        for _ in range(args.rounds):
            for tools in (False, True):
                for level in ("standard", "off"):
                    found = turn_cpu_ms(workdir, level, tools, args.inputs)
                    key = (tools, level)
                    best[key] = min(best.get(key, found), found)
    print(f"{'workload':<10} {'off ms/turn':>12} {'standard':>9} {'log':>7} {'of it, writes':>14}")
    for tools in (False, True):
        off, standard = best[(tools, "off")][0], best[(tools, "standard")]
        print(
            f"{'tool loop' if tools else 'plain':<10} {off:12.3f} {standard[0]:9.3f} "
            f"{standard[0] - off:7.3f} {standard[1]:14.3f}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
