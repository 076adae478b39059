"""An event-log job the durability test runs in a subprocess, stops with a savepoint or kills.

Event JSON lines come from a FileSource that keeps watching its folder (so the job never
ends by itself, as in production) and go, rebalanced over two thread-mode subtasks, to
`sink_event_log` flushing every 0.2 s and rolling only after 10 minutes. The job serves
Flink's REST API on a free port and prints `JOB <id> <host:port>`, so that the test can stop
it with `streamagents savepoint`; the script then waits until the job ends.
"""

from __future__ import annotations

import argparse

from pyflink.common import Configuration, Duration, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

from streamagents.jobs.cluster.standalone import free_port
from streamagents.operators.flink import sink_event_log


def main() -> None:
    """Parse the arguments, start the job, print its id and REST address, wait for its end."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--restore")
    args = parser.parse_args()
    port = free_port()
    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("restart-strategy.type", "none")
    conf.set_string("rest.port", str(port))
    conf.set_string("rest.bind-port", str(port))
    conf.set_string("rest.bind-address", "localhost")
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
    client = env.execute_async("eventlog-durability")
    print(f"JOB {client.get_job_id()} localhost:{port}", flush=True)
    client.get_job_execution_result().result()


if __name__ == "__main__":
    main()
