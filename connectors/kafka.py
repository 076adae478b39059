"""Kafka topics as a source of JSON lines and as sinks of JSON records, via Flink's connector jar.

The source is Flink's `KafkaSource`: record values as bytes, exactly as written (the parse
step decodes them, so a value that is not UTF-8 reaches its dead letter byte for byte).
The sink is the Kafka connector's table sink fed from the DataStream: the PyFlink
DataStream `KafkaSink` can only serialize a whole element into the record key, while the
table sink takes the key from a column (`key.fields`), so each JSON record is written as
value `raw` bytes under its `key` field as the record key — a partition then holds one
key's records in the order they were written. With `exactly-once` the records go out in
Kafka transactions committed when the checkpoint covering them completes;
`at-least-once` flushes on each checkpoint.
`kafka_keyed_sink` writes rows that carry their key already, with text or bytes values
(the event log's Avro single-object messages).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyflink.common import Row, Types, WatermarkStrategy
from pyflink.common.serialization import ByteArraySchema
from pyflink.datastream import DataStream, StreamExecutionEnvironment

__all__ = [
    "RECORD_BYTES",
    "KafkaTopic",
    "add_connector_jar",
    "kafka_keyed_sink",
    "kafka_sink",
    "kafka_source",
    "offsets_initializer",
    "record_key",
]

Delivery = Literal["exactly-once", "at-least-once"]
StartingOffsets = Literal["earliest", "latest", "committed"]
OffsetReset = Literal["earliest", "latest", "none"]

RECORD_BYTES = Types.PRIMITIVE_ARRAY(Types.BYTE())
"""The type of the source's elements: record values as bytes."""


def add_connector_jar(env: StreamExecutionEnvironment, jar: str) -> None:
    """Put the flink-sql-connector-kafka jar (a path or URI) on the job's classpath."""
    env.add_jars(jar if "://" in jar else Path(jar).resolve().as_uri())


def kafka_source(
    env: StreamExecutionEnvironment,
    *,
    topics: Sequence[str],
    bootstrap_servers: str,
    group_id: str,
    starting_offsets: StartingOffsets = "committed",
    offset_reset: OffsetReset = "earliest",
    properties: Mapping[str, str] | None = None,
    name: str = "kafka-source",
) -> DataStream:
    """Record values of Kafka topics as bytes, exactly as written (the connector jar must be
    added first; the parse step decodes them, and keeps the bytes of a value that is not
    UTF-8).

    A job that restores no checkpoint starts at `starting_offsets`; with `committed`, a
    partition the group has committed nothing for starts at `offset_reset` (`none` fails)."""
    # Imported late: the classes only load once the connector jar is on the classpath.
    from pyflink.datastream.connectors.kafka import KafkaSource

    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap_servers)
        .set_topics(*topics)
        .set_group_id(group_id)
        .set_starting_offsets(offsets_initializer(starting_offsets, offset_reset))
        .set_value_only_deserializer(ByteArraySchema())
    )
    for key, value in (properties or {}).items():
        builder = builder.set_property(key, value)
    return env.from_source(
        builder.build(), WatermarkStrategy.no_watermarks(), name, type_info=RECORD_BYTES
    ).uid(name)


def offsets_initializer(starting_offsets: StartingOffsets, offset_reset: OffsetReset) -> Any:
    """The connector's `OffsetsInitializer` for a source's starting offsets and, with
    `committed`, the reset strategy for partitions without a committed offset."""
    from pyflink.datastream.connectors.kafka import (
        KafkaOffsetResetStrategy,
        KafkaOffsetsInitializer,
    )

    if starting_offsets == "earliest":
        return KafkaOffsetsInitializer.earliest()
    if starting_offsets == "latest":
        return KafkaOffsetsInitializer.latest()
    reset = KafkaOffsetResetStrategy[offset_reset.upper()]
    return KafkaOffsetsInitializer.committed_offsets(reset)


def record_key(record: str) -> str | None:
    """The Kafka key of a JSON record: its `key` field as a string (None when absent)."""
    try:
        key = json.loads(record).get("key")
    except (ValueError, AttributeError):
        return None
    return None if key is None else str(key)


_KEYED_TEXT = Types.ROW_NAMED(["key", "value"], [Types.STRING(), Types.STRING()])


@dataclass(frozen=True)
class KafkaTopic:
    """Where and how a sink writes: the topic, the cluster, the delivery guarantee and its
    transaction settings, and further producer properties.

    `transactional_id_prefix` must be unique among the jobs writing to the cluster and
    stable across restarts of this one (exactly-once only)."""

    topic: str
    bootstrap_servers: str
    delivery: Delivery
    transactional_id_prefix: str
    transaction_timeout_s: float
    properties: Mapping[str, str] = field(default_factory=dict)


def kafka_sink(stream: DataStream, target: KafkaTopic, *, name: str) -> None:
    """Write each JSON string of `stream` to `target`, keyed by its `key` field.

    `name` names the keying step (`<name>-key`) and the sink's table (`name` with `-` as
    `_`)."""
    keyed = stream.map(lambda record: Row(record_key(record), record), output_type=_KEYED_TEXT)
    kafka_keyed_sink(keyed.name(f"{name}-key").uid(f"{name}-key"), target, binary=False, name=name)


def kafka_keyed_sink(rows: DataStream, target: KafkaTopic, *, binary: bool, name: str) -> None:
    """Write rows `(key: STRING, value: STRING, or BYTES when binary)` to `target`: the key
    (may be None) as the record key, the value as the record value, both raw."""
    from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor

    t_env = StreamTableEnvironment.create(rows.get_execution_environment())
    schema = (
        Schema.new_builder()
        .column("key", DataTypes.STRING())
        .column("value", DataTypes.BYTES() if binary else DataTypes.STRING())
        .build()
    )
    descriptor = (
        TableDescriptor.for_connector("kafka")
        .schema(schema)
        .option("topic", target.topic)
        .option("properties.bootstrap.servers", target.bootstrap_servers)
        .option("key.format", "raw")
        .option("key.fields", "key")
        .option("value.format", "raw")
        .option("value.fields-include", "EXCEPT_KEY")
        .option("sink.delivery-guarantee", target.delivery)
    )
    if target.delivery == "exactly-once":
        timeout_ms = str(int(target.transaction_timeout_s * 1000))
        descriptor = descriptor.option(
            "sink.transactional-id-prefix", target.transactional_id_prefix
        ).option("properties.transaction.timeout.ms", timeout_ms)
    for key, value in target.properties.items():
        descriptor = descriptor.option(f"properties.{key}", value)
    table_name = name.replace("-", "_")
    t_env.create_temporary_table(table_name, descriptor.build())
    statements = t_env.create_statement_set()
    statements.add_insert(table_name, t_env.from_data_stream(rows))
    statements.attach_as_datastream()
