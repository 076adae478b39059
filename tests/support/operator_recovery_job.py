"""A checkpointed agent job the recovery tests run in a subprocess, kill, stop and resume.

Inputs come from the JSONL files of a folder read by a FileSource that keeps watching it
(a test adds a file to give more inputs; the read position is checkpointed, and an
unbounded source keeps the job in its streaming steady state, as in production); outputs
go to a FileSink whose part files are committed only when a checkpoint completes, so an
output emitted after the last checkpoint of a killed run is never visible.

The model is the `gemini` wire unless `--provider` names another (`gemini-interactions`);
`--tool module:function` gives the agent a tool, `--approval-tool` one whose calls need
approval (its requests go to FileSink part files in `--approval-requests`), `--followups`
gives it `schedule_followup`, `--event-log DIR` writes the event log, `--telemetry URL`
sends live spans there (with `--telemetry-header NAME=VALUE`, content captured). Modes:

- `run`: run until killed (optionally restored from `--restore`);
- `savepoint`: run until `--stop-after` outputs are committed, stop with a savepoint
  through the Java client (PyFlink 2.3's own `stop_with_savepoint` is broken), print its
  path and exit.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

from pyflink.common import Configuration, Duration, Encoder, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    RollingPolicy,
    StreamFormat,
)
from pyflink.java_gateway import get_gateway

from streamagents.operators.agent import AgentConfig, ModelSpec, TelemetryConfig
from streamagents.operators.agent.config import DecisionsConfig, FollowupConfig, ToolRef
from streamagents.operators.flink import agent_stream, configure_environment, event_log_writer


def build(args: argparse.Namespace) -> StreamExecutionEnvironment:
    """The job graph: file source, agent, file sink for outputs."""
    conf = configure_environment(Configuration())
    conf.set_string("execution.checkpointing.interval", "500 ms")
    conf.set_string("execution.checkpointing.dir", Path(args.checkpoints).as_uri())
    conf.set_string(
        "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION"
    )
    conf.set_string("restart-strategy.type", "none")
    if args.restore:
        conf.set_string("execution.state-recovery.path", args.restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    for tool in [*args.tool, *args.approval_tool]:  # their modules, for the embedded Python
        env.add_python_file(importlib.import_module(tool.partition(":")[0]).__file__)
    config = AgentConfig(
        job_id="operator-recovery",
        model=ModelSpec(
            provider=args.provider,
            model="gemini-3-flash-preview",
            options={"api_key": "test-key", "base_url": args.stub, "max_retries": 0},
        ),
        tools=[*args.tool, *(ToolRef(ref=t, approval="required") for t in args.approval_tool)],
        decisions=DecisionsConfig(from_input=bool(args.approval_tool)),
        max_in_flight=8,
        followups=FollowupConfig(enabled=args.followups, min_delay_s=0.5),
        media_store=args.media,
        offload_threshold_bytes=1024,
        event_log_level="standard" if args.event_log else "off",
        telemetry=None
        if args.telemetry is None
        else TelemetryConfig(
            otlp_endpoint=args.telemetry,
            headers=dict(h.split("=", 1) for h in args.telemetry_header),
            capture_content=True,
        ),
    )
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.inputs)
        .monitor_continuously(Duration.of_millis(200))
        .build()
    )
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "inputs").uid("inputs")
    event_log = event_log_writer(args.event_log) if args.event_log else None
    streams = agent_stream(lines, config, event_log=event_log)
    sink = (
        FileSink.for_row_format(args.outputs, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .build()
    )
    streams.outputs.sink_to(sink).uid("outputs")
    if args.approval_requests:
        requests = (
            FileSink.for_row_format(args.approval_requests, Encoder.simple_string_encoder())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .build()
        )
        streams.approval_requests.sink_to(requests).uid("approval-requests")
    return env


def committed_lines(outputs: Path) -> int:
    """Output lines in committed part files (pending and in-progress ones start with '.')."""
    files = [p for p in outputs.rglob("part-*") if not p.name.startswith(".")]
    return sum(len(p.read_text().splitlines()) for p in files)


def main() -> None:
    """Parse the arguments and run the job in the chosen mode."""
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "savepoint"])
    parser.add_argument("--stub", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--outputs", required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--media", required=True)
    parser.add_argument("--restore")
    parser.add_argument("--savepoints")
    parser.add_argument("--stop-after", type=int, default=1)
    parser.add_argument("--provider", default="gemini")
    parser.add_argument("--tool", action="append", default=[], help="module:function")
    parser.add_argument("--approval-tool", action="append", default=[], help="module:function")
    parser.add_argument("--approval-requests", help="directory of approval request files")
    parser.add_argument("--followups", action="store_true", help="give schedule_followup")
    parser.add_argument("--event-log")
    parser.add_argument("--telemetry", help="OTLP/HTTP collector URL")
    parser.add_argument("--telemetry-header", action="append", default=[], help="NAME=VALUE")
    args = parser.parse_args()
    env = build(args)
    if args.mode == "run":
        env.execute("operator-recovery")
        return
    client = env.execute_async("operator-recovery")
    while committed_lines(Path(args.outputs)) < args.stop_after:
        time.sleep(0.05)
    formats = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType
    path = client._j_job_client.stopWithSavepoint(False, args.savepoints, formats.CANONICAL).get()
    print(f"SAVEPOINT {path}", flush=True)


if __name__ == "__main__":
    main()
