"""Benchmark of the agent operator on the local mini-cluster (thread mode, parallelism 1).

Prints, in one run:

1. turns/s of one subtask with a fixed-latency (200 ms) test-double model for
   max_in_flight 1, 8 and 64, next to the limit max_in_flight / latency;
2. the per-turn cost with a zero-latency test-double model next to a bare PyFlink
   keyed-state job (parse JSON, read and write a ValueState, emit) over the same kind of
   records (more of them, so that its much shorter run is still measurable);
3. keyed-state bytes per key after 10 turns per key whose inputs carry 5 x 1 MB images,
   from the size of a checkpoint taken after the last turn;
4. the per-turn cost of live telemetry: the 0 ms model with telemetry off, on (spans and
   metrics to a loopback OTLP collector) and on with content, alternated twice.

Run: `python benchmarks/bench_operator.py` (about 3-4 minutes); `--telemetry` runs only 4.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Duration, Encoder, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    RollingPolicy,
    StreamFormat,
)
from pyflink.datastream.state import ValueStateDescriptor

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import ChatModel
from streamagents.operators.agent import (
    AgentConfig,
    AgentRuntime,
    ModelSpec,
    TelemetryConfig,
    ToolRegistry,
)
from streamagents.operators.flink import agent_stream, configure_environment
from streamagents.serde.chat import ChatResponse, TokenUsage, ToolSpec
from streamagents.serde.messages import ChatMessage

LATENCY_S = 0.2


class FixedLatencyTestModel(ChatModel):
    """Test double (not a provider): answers "done" after a fixed delay."""

    provider = "fixed-latency-test-double"

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        """Wait `latency_s`, then answer."""
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return ChatResponse(
            message=ChatMessage(role="assistant", content="done"),
            usage=TokenUsage(input_tokens=10, output_tokens=1),
        )


def test_double_runtime(config: AgentConfig, latency_s: float) -> AgentRuntime:
    """The real runtime around the fixed-latency test-double model."""
    model = FixedLatencyTestModel(latency_s)
    return AgentRuntime(config, model, ToolRegistry(), MediaStore(config.media_store))


def agent_config(
    workdir: Path, max_in_flight: int, telemetry: TelemetryConfig | None = None
) -> AgentConfig:
    """The benchmark agent: no tools, default budgets and memory."""
    return AgentConfig(
        job_id="bench",
        model=ModelSpec(provider="test-double", model="fixed-latency"),
        max_in_flight=max_in_flight,
        media_store=str(workdir / "media"),
        telemetry=telemetry,
    )


def environment(extra: dict[str, str] | None = None) -> StreamExecutionEnvironment:
    """A parallelism-1 environment with the engine's settings."""
    conf = configure_environment(Configuration())
    for key, value in (extra or {}).items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    return env


def text_inputs(count: int, keys: int) -> list[str]:
    """`count` small text inputs spread over `keys` keys."""
    return [
        json.dumps({"id": f"i{i}", "key": f"k{i % keys}", "text": f"hi {i}"}) for i in range(count)
    ]


def timed_collect(stream: Any) -> tuple[int, float]:
    """Collect a job's records; (count, seconds from the first record to the last)."""
    first = last = 0.0
    count = 0
    with stream.map(lambda s: s, Types.PICKLED_BYTE_ARRAY()).execute_and_collect() as results:
        for _ in results:
            last = time.perf_counter()
            first = first or last
            count += 1
    return count, last - first


def agent_turns_per_s(
    workdir: Path,
    max_in_flight: int,
    latency_s: float,
    count: int,
    telemetry: TelemetryConfig | None = None,
) -> float:
    """Turns/s of one agent subtask over `count` inputs on count/2 keys."""
    env = environment()
    lines = env.from_collection(text_inputs(count, max(1, count // 2)), Types.STRING())
    factory = functools.partial(test_double_runtime, latency_s=latency_s)
    config = agent_config(workdir, max_in_flight, telemetry)
    streams = agent_stream(lines, config, factory)
    done, seconds = timed_collect(streams.outputs)
    assert done == count, f"{done} outputs for {count} inputs"
    return (count - 1) / seconds


class BareKeyedCount(KeyedProcessFunction):
    """The bare PyFlink baseline: parse the record, bump a ValueState, emit a record."""

    def open(self, runtime_context: RuntimeContext) -> None:
        """Declare the state."""
        self._seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.STRING()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        """One record in, one record out."""
        record = json.loads(value)
        seen = json.loads(self._seen.value() or "0") + 1
        self._seen.update(json.dumps(seen))
        yield json.dumps({"id": record["id"], "seen": seen})


def bare_records_per_s(count: int) -> float:
    """Records/s of the bare keyed-state job over the same kind of inputs."""
    env = environment()
    lines = env.from_collection(text_inputs(count, count // 2), Types.STRING())
    keyed = lines.key_by(lambda line: json.loads(line)["key"], key_type=Types.STRING())
    done, seconds = timed_collect(keyed.process(BareKeyedCount(), output_type=Types.STRING()))
    assert done == count
    return (count - 1) / seconds


def image_inputs(path: Path, keys: int, turns: int, images: int, size: int) -> int:
    """Write inputs carrying `images` distinct random images of `size` bytes each."""
    with path.open("w") as out:
        for turn in range(turns):
            for key in range(keys):
                parts = [
                    {
                        "kind": "image",
                        "mime_type": "image/png",
                        "data": base64.b64encode(os.urandom(size)).decode(),
                    }
                    for _ in range(images)
                ]
                record = {"id": f"m{key}-{turn}", "key": f"k{key}", "text": "look", "parts": parts}
                out.write(json.dumps(record) + "\n")
    return keys * turns


def committed_lines(folder: Path) -> int:
    """Lines in committed part files of a FileSink folder."""
    files = [p for p in folder.rglob("part-*") if not p.name.startswith(".")]
    return sum(len(p.read_text().splitlines()) for p in files)


def latest_checkpoint(folder: Path) -> tuple[int, Path | None]:
    """The number and folder of the newest completed checkpoint ((0, None) when none)."""
    done = [(int(p.parent.name.split("-")[1]), p.parent) for p in folder.glob("*/chk-*/_metadata")]
    return max(done) if done else (0, None)


def state_bytes_per_key(workdir: Path, keys: int = 2, turns: int = 10) -> tuple[float, int]:
    """Checkpoint bytes per key once every key ran `turns` turns with 5 x 1 MB images each.

    The job reads a watched folder (so it keeps running and checkpointing after the last
    turn) and writes outputs to a FileSink; the checkpoint also holds the source's and the
    sink's small state, so the figure is an upper bound of the keyed state.
    """
    inputs = workdir / "images.jsonl"
    expected = image_inputs(inputs, keys, turns, images=5, size=1_000_000)
    checkpoints, outputs = workdir / "checkpoints", workdir / "outputs"
    env = environment(
        {
            "execution.checkpointing.interval": "500 ms",
            "execution.checkpointing.dir": checkpoints.as_uri(),
            "execution.checkpointing.externalized-checkpoint-retention": ("RETAIN_ON_CANCELLATION"),
        }
    )
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(inputs))
        .monitor_continuously(Duration.of_millis(500))
        .build()
    )
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "images")
    factory = functools.partial(test_double_runtime, latency_s=0.0)
    streams = agent_stream(lines, agent_config(workdir, 8), factory)
    sink = (
        FileSink.for_row_format(str(outputs), Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .build()
    )
    streams.outputs.sink_to(sink)
    client = env.execute_async("bench-state")
    try:
        deadline = time.monotonic() + 600
        while committed_lines(outputs) < expected:
            assert time.monotonic() < deadline, "the image job did not finish in time"
            time.sleep(0.2)
        after, _ = latest_checkpoint(checkpoints)
        total = None
        while total is None:
            number, latest = latest_checkpoint(checkpoints)
            if number >= after + 2 and latest is not None:
                with contextlib.suppress(FileNotFoundError):  # retention deleted it meanwhile
                    total = sum(p.stat().st_size for p in latest.rglob("*") if p.is_file())
            time.sleep(0.1)
    finally:
        client.cancel().result()
    return total / keys, total


def telemetry_cost(workdir: Path, count: int = 5000) -> None:
    """Print the per-turn cost of the 0 ms model with telemetry off, on, and on with content
    (alternated twice), spans and metrics going to a loopback collector in this process."""
    ok = StubReply(b"", headers={})
    with LoopbackStubServer(lambda _request: ok) as collector:
        settings = {
            "off": None,
            "on": TelemetryConfig(otlp_endpoint=collector.url),
            "on + content": TelemetryConfig(otlp_endpoint=collector.url, capture_content=True),
        }
        times: dict[str, list[float]] = {name: [] for name in settings}
        for _ in range(2):
            for name, telemetry in settings.items():
                rate = agent_turns_per_s(workdir, 64, 0.0, count, telemetry)
                times[name].append(1000 / rate)
        spans = sum(r.path == "/v1/traces" for r in collector.requests)
    base = min(times["off"])
    for name, measured in times.items():
        best = min(measured)
        print(
            f"{'telemetry ' + name:>23}: {best:6.3f} ms/turn (runs {measured[0]:.3f}, "
            f"{measured[1]:.3f}), {best / base:5.2f}x off, {best - base:+.3f} ms/turn"
        )
    print(f"{'collector':>23}: {spans} span requests received")


def main() -> None:
    """Run every measurement and print the figures side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--telemetry", action="store_true", help="Run only section 4.")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    try:
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
        if args.telemetry:
            print("\n4. live telemetry, 0 ms test-double model (5000 inputs per run)")
            telemetry_cost(workdir)
            return
        print(f"\n1. turns/s per subtask, {LATENCY_S * 1000:.0f} ms test-double model")
        print(f"{'max_in_flight':>14} {'inputs':>7} {'turns/s':>9} {'limit':>7} {'ratio':>6}")
        for max_in_flight, count in ((1, 25), (8, 200), (64, 2000)):
            rate = agent_turns_per_s(workdir, max_in_flight, LATENCY_S, count)
            limit = max_in_flight / LATENCY_S
            print(f"{max_in_flight:>14} {count:>7} {rate:>9.1f} {limit:>7.0f} {rate / limit:>6.2f}")
        print("\n2. per-turn cost, 0 ms test-double model (5000 inputs) vs a bare keyed-state job")
        agent_rate = agent_turns_per_s(workdir, 64, 0.0, 5000)
        bare_rate = bare_records_per_s(20000)
        print(
            f"{'agent operator':>16}: {agent_rate:8.0f} turns/s  {1000 / agent_rate:6.2f} ms/turn"
        )
        print(
            f"{'bare keyed job':>16}: {bare_rate:8.0f} recs/s   {1000 / bare_rate:6.2f} ms/record"
        )
        print(f"{'engine overhead':>16}: {1000 / agent_rate - 1000 / bare_rate:6.2f} ms/turn")
        print("\n3. keyed state after 10 turns per key, each input with 5 x 1 MB images")
        per_key, total = state_bytes_per_key(workdir)
        print(f"checkpoint {total} bytes for 2 keys: {per_key / 1024:.1f} KiB per key (target 16)")
        print("\n4. live telemetry, 0 ms test-double model (5000 inputs per run)")
        telemetry_cost(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
