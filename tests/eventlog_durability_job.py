"""An event-log job the durability test runs in a subprocess, stops with a savepoint or kills.

Event JSON lines come from a FileSource that keeps watching its folder (so the job never
ends by itself, as in production) and go, rebalanced over two thread-mode subtasks, to
`sink_event_log` flushing every 0.2 s and rolling only after 10 minutes. Modes:

- `savepoint`: once `--expect` events are readable in the log's in-progress files, stop
  with a savepoint through the Java client (PyFlink 2.3's own `stop_with_savepoint` is
  broken), print its path and exit;
- `run`: run (optionally restored from `--restore`) until killed.
"""

from __future__ import annotations

import argparse
import time

from pyflink.common import Configuration, Duration, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.java_gateway import get_gateway

from streamagents.connectors.eventlog import read_events
from streamagents.operators.eventlog_sink import sink_event_log


def readable_events(log: str) -> int:
    """Events readable in the log so far, in-progress files included."""
    try:
        return sum(1 for _ in read_events(log, include_in_progress=True))
    except FileNotFoundError:  # the sink has not created the folder yet
        return 0


def main() -> None:
    """Parse the arguments and run the job in the chosen mode."""
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "savepoint"])
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--restore")
    parser.add_argument("--savepoints")
    parser.add_argument("--expect", type=int, default=0)
    args = parser.parse_args()
    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("restart-strategy.type", "none")
    if args.restore:
        conf.set_string("execution.state-recovery.path", args.restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.inputs)
        .monitor_continuously(Duration.of_millis(200))
        .build()
    )
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "inputs").uid("inputs")
    sink_event_log(lines.rebalance(), args.log, roll_seconds=600, flush_seconds=0.2)
    if args.mode == "run":
        env.execute("eventlog-durability")
        return
    client = env.execute_async("eventlog-durability")
    while readable_events(args.log) < args.expect:
        time.sleep(0.1)
    formats = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType
    path = client._j_job_client.stopWithSavepoint(False, args.savepoints, formats.CANONICAL).get()
    print(f"SAVEPOINT {path}", flush=True)


if __name__ == "__main__":
    main()
