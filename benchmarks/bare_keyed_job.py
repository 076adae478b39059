"""A bare PyFlink job, the yardstick of `bench_first_example.py`: one record, keyed, through
a keyed process function with a value state, written to a file, on the local mini-cluster
in thread mode, as a user's first hand-written job would be.

Run: `python benchmarks/bare_keyed_job.py OUT_DIR`.
"""

from __future__ import annotations

import sys

from pyflink.common import Configuration, Encoder, Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.state import ValueStateDescriptor


class CountPerKey(KeyedProcessFunction):
    """Counts the records of each key in keyed state and emits `key count`."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: str, ctx: KeyedProcessFunction.Context):  # type: ignore[no-untyped-def]
        seen = (self.count.value() or 0) + 1
        self.count.update(seen)
        yield f"{value} {seen}"


def main(out_dir: str) -> None:
    """Build and run the job to its end."""
    config = Configuration()
    config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    sink = FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build()
    (
        env.from_collection(["customer-1"], Types.STRING())
        .key_by(lambda line: line, Types.STRING())
        .process(CountPerKey(), Types.STRING())
        .sink_to(sink)
    )
    env.execute("bare-keyed-job")


if __name__ == "__main__":
    main(sys.argv[1])
