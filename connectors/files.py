"""JSON-lines sources and sinks on Flink's file connectors (Kafka is in `connectors.kafka`).

Records stay JSON strings (`Types.STRING()`) end to end. The source reads JSONL files with
Flink's `FileSource` (a file, or a directory read once or watched for new files). The sink
is Flink's `FileSink` rolling on checkpoints, so a line becomes visible — its part file renamed from
the hidden in-progress name — only when the checkpoint that covers it completes: after a
failure and restore nothing is lost and nothing is written twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.serialization import Encoder
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)

__all__ = [
    "jsonl_sink",
    "jsonl_source",
    "read_jsonl",
]

PART_SUFFIX = ".jsonl"


def jsonl_source(
    env: StreamExecutionEnvironment,
    path: str,
    *,
    watch_interval_s: float | None = None,
    name: str = "jsonl-source",
) -> DataStream:
    """Lines of a JSONL file or directory; with `watch_interval_s`, new files keep coming."""
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path)
    if watch_interval_s is not None:
        builder = builder.monitor_continuously(Duration.of_millis(int(watch_interval_s * 1000)))
    return env.from_source(
        builder.build(), WatermarkStrategy.no_watermarks(), name, type_info=Types.STRING()
    ).uid(name)


def jsonl_sink(stream: DataStream, directory: str, *, prefix: str, name: str) -> None:
    """Write each string of `stream` as one line of `<directory>/<prefix>-*.jsonl`, exactly once."""
    sink = (
        FileSink.for_row_format(directory, Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_output_file_config(
            OutputFileConfig.builder()
            .with_part_prefix(prefix)
            .with_part_suffix(PART_SUFFIX)
            .build()
        )
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .build()
    )
    stream.sink_to(sink).name(name).uid(name)


def _committed_part_files(directory: str | Path) -> Iterator[Path]:
    root = Path(directory)
    if not root.is_dir():
        return
    for path in sorted(root.iterdir()):
        if path.is_file() and not path.name.startswith(".") and PART_SUFFIX in path.name:
            yield path


def read_jsonl(directory: str | Path) -> list[dict[str, Any]]:
    """Every record committed to a JSONL sink directory (in-progress files are not read)."""
    records = []
    for path in _committed_part_files(directory):
        with path.open(encoding="utf-8") as lines:
            records.extend(json.loads(line) for line in lines if line.strip())
    return records
