"""A second input that keeps the agent function's input open after a bounded source ends.

At the end of a bounded input Flink lifts the watermark to its maximum, and the agent
function then finishes its last runs inside that watermark's timer loop, where no
checkpoint can be taken (docs/agent-operator.md, "End of a bounded input"). The hold
joins the parsed input right before `key_by`, so the function's input watermark stays low
after the real source has ended: the source's tasks finish (Flink goes on checkpointing
the tasks still running), the last runs go on under regular checkpoints, and whoever runs
the job ends it with a stop-with-savepoint that drains (which ends the hold) once nothing
is left.

The hold is a file source that monitors `/dev/null` with a discovery interval of a
century: it reads its empty split at the start (Flink enumerates the path once, at once,
and the path must exist), then nothing; it never emits a watermark and never ends by
itself (a monitored file source ends only when the job is stopped).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyflink.common import Duration, Row, Types, WatermarkStrategy
from pyflink.datastream import DataStream, KeyedStream, ProcessFunction
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.java_gateway import get_gateway

from streamagents.operators.flink.parse_records import KEYED_INPUT_TYPE

__all__ = ["key_with_hold"]

_CENTURY_MS = 100 * 365 * 24 * 3600 * 1000
_EMPTY = "file:///dev/null"
_KEYED_ROW = Types.ROW([Types.STRING(), KEYED_INPUT_TYPE])
# PyFlink's own name for the step `key_by` adds: its job-graph rewriting chains a step of
# this name to its input at the input's parallelism, as it does for `key_by`.
_KEY_STEP_NAME = "_stream_key_by_map_operator"


class _WithKey(ProcessFunction):
    """What `key_by` adds before partitioning: the key beside each (key, line) input."""

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterator[Row]:
        yield Row(value[0], value)


def _nothing(_line: str) -> Iterator[Row]:
    """The hold's records as keyed input: none (it reads nothing anyway)."""
    return iter(())


def key_with_hold(parsed: DataStream, name: str) -> KeyedStream:
    """`parsed` (of `KEYED_INPUT_TYPE`) keyed by its key as `key_by` would, with the hold
    (operators `<name>-input-end-hold...`) joined after the key is added, so the parse step
    stays chained to its source (a union before `key_by` would give the key step two
    inputs and break that chain)."""
    hold_name = f"{name}-input-end-hold"
    parallelism = parsed._j_data_stream.getParallelism()
    env = parsed.get_execution_environment()
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), _EMPTY
    ).monitor_continuously(Duration.of_millis(_CENTURY_MS))
    hold = (
        env.from_source(source.build(), WatermarkStrategy.no_watermarks(), hold_name)
        .uid(hold_name)
        .set_parallelism(parallelism)
        .flat_map(_nothing, output_type=_KEYED_ROW)
        .set_parallelism(parallelism)
        .name(f"{hold_name}-keyed")
        .uid(f"{hold_name}-keyed")
    )
    rows = (
        parsed.process(_WithKey(), output_type=_KEYED_ROW)
        .set_parallelism(parallelism)
        .name(_KEY_STEP_NAME)
    )
    keyed = rows.union(hold)._j_data_stream.keyBy(
        get_gateway().jvm.KeyByKeySelector(), Types.ROW([Types.STRING()]).get_java_type_info()
    )
    return KeyedStream(keyed, KEYED_INPUT_TYPE, parsed)
