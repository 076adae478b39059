"""The event-log topic as the recorded runs of `streamagents replay`: options and copy job.

`--log-topic TOPIC` names the topic; the connection comes from the production spec's
`event_log.kafka` (`--log-spec SPEC`: its bootstrap servers, client properties with their
${ENV} values, connector jar, and its media store for offloaded events) or from flags
(`--bootstrap-servers`, `--kafka-property KEY=VALUE`). `log_topic` checks them before any
job starts. `copy_topic` runs a bounded Flink SQL job through the product's Kafka connector
(no Python Kafka client): it reads every partition from its earliest offset to the offset
it had when the job started (committed transactions only, unless a property says
otherwise), and writes each message's partition, offset and value to JSON lines in a
folder, which `streamagents.jobs.replay.topic_log` turns into an event-log file.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamagents.connectors.connector_jars import JarFetchError, cached_jar
from streamagents.jobs.cluster.standalone import free_port
from streamagents.jobs.spec import SpecError, load_spec
from streamagents.jobs.spec.yaml_source import expand_assignments

__all__ = ["LogTopic", "LogTopicError", "add_topic_options", "copy_topic", "log_topic"]


class LogTopicError(ValueError):
    """The event-log topic options do not name one topic and its connection."""


@dataclass(frozen=True)
class LogTopic:
    """An event-log topic and how to reach it."""

    topic: str
    bootstrap_servers: str
    properties: Mapping[str, str]
    connector_jar: str
    media_root: str | None
    """The production spec's media store (offloaded events), when a spec was named."""

    def describe(self) -> str:
        """The topic and its servers, for a person (never the properties' values)."""
        return f"kafka topic {self.topic} at {self.bootstrap_servers}"


def add_topic_options(parser: argparse.ArgumentParser) -> None:
    """Add `--log-topic`, `--log-spec`, `--bootstrap-servers` and `--kafka-property`."""
    group = parser.add_argument_group(
        "event-log topic (instead of --log)",
        "Read the recorded runs from the event-log topic a production job writes: its "
        "messages up to the newest at start, copied into OUT/recorded/ first.",
    )
    group.add_argument(
        "--log-topic",
        metavar="TOPIC",
        help="the event-log topic (default with --log-spec: the spec's event_log.kafka.topic)",
    )
    group.add_argument(
        "--log-spec",
        metavar="SPEC",
        help="the production job spec: the connection (bootstrap servers, client properties, "
        "connector jar) of its event_log.kafka, and its media store for offloaded events",
    )
    group.add_argument(
        "--bootstrap-servers", metavar="HOSTS", help="host:port[,...] (without --log-spec)"
    )
    group.add_argument(
        "--kafka-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka consumer property, e.g. security.protocol=SASL_SSL (repeatable; "
        "without --log-spec); ${NAME} in VALUE is read from the environment",
    )


def log_topic(args: argparse.Namespace) -> LogTopic | None:
    """The topic the options name, or None when they name none (the log is files); raises
    `LogTopicError` with the rule broken."""
    flags = args.bootstrap_servers is not None or bool(args.kafka_property)
    if args.log_topic is None and args.log_spec is None:
        if flags:
            raise LogTopicError("--bootstrap-servers and --kafka-property need --log-topic")
        if not args.log:
            raise LogTopicError("name the recorded runs: --log LOG... or --log-topic TOPIC")
        return None
    if args.log:
        raise LogTopicError("give --log (files) or the event-log topic, not both")
    if args.log_spec is not None:
        if flags:
            raise LogTopicError(
                "--log-spec gives the topic's connection: leave out --bootstrap-servers and "
                "--kafka-property, or --log-spec"
            )
        return _from_spec(args.log_spec, args.log_topic)
    if args.bootstrap_servers is None or not args.bootstrap_servers.strip():
        raise LogTopicError("--log-topic needs --bootstrap-servers, or --log-spec for them")
    try:
        properties = expand_assignments(args.kafka_property, "--kafka-property")
    except ValueError as exc:
        raise LogTopicError(str(exc)) from None
    return LogTopic(args.log_topic, args.bootstrap_servers.strip(), properties, _cached_jar(), None)


def _from_spec(path: str, topic: str | None) -> LogTopic:
    try:
        spec = load_spec(path).spec
    except SpecError as exc:
        raise LogTopicError(f"--log-spec: invalid job spec:\n{exc}") from None
    log = spec.event_log
    if log is None or log.kafka is None:
        where = "has no event log" if log is None else f"logs to files at {log.path}: use --log"
        raise LogTopicError(f"--log-spec {path}: the spec {where}")
    kafka = log.kafka
    jar = kafka.connector_jar
    if jar is not None and "://" not in jar and not Path(jar).is_file():
        raise LogTopicError(f"--log-spec {path}: event_log.kafka.connector_jar: no such file {jar}")
    return LogTopic(
        topic or kafka.topic,
        kafka.bootstrap_servers,
        dict(kafka.properties),
        jar or _cached_jar(),
        spec.media_store,
    )


def _cached_jar() -> str:
    try:
        jar = cached_jar("kafka")
    except JarFetchError as exc:
        raise LogTopicError(f"no Kafka connector jar: {exc}") from None
    if jar is None:
        raise LogTopicError(
            "no Kafka connector jar in the cache; run `streamagents jars fetch kafka`"
        )
    return str(jar)


def copy_topic(topic: LogTopic, folder: Path) -> None:
    """Copy the topic's messages, earliest to those there at start, into JSON lines under
    `folder` (a bounded batch job on a local mini-cluster; raises its failure)."""
    from pyflink.common import Configuration
    from pyflink.table import (
        DataTypes,
        EnvironmentSettings,
        Schema,
        TableDescriptor,
        TableEnvironment,
    )

    config = Configuration()
    config.set_string("rest.port", str(free_port()))
    config.set_string("restart-strategy.type", "none")
    config.set_string("parallelism.default", "1")
    uri = topic.connector_jar if "://" in topic.connector_jar else Path(topic.connector_jar)
    config.set_string("pipeline.jars", uri if isinstance(uri, str) else uri.resolve().as_uri())
    settings = EnvironmentSettings.new_instance().in_batch_mode().with_configuration(config)
    t_env = TableEnvironment.create(settings.build())
    source = (
        TableDescriptor.for_connector("kafka")
        .schema(
            Schema.new_builder()
            .column_by_metadata("partition", DataTypes.INT(), "partition", True)
            .column_by_metadata("offset", DataTypes.BIGINT(), "offset", True)
            .column("value", DataTypes.BYTES())
            .build()
        )
        .option("topic", topic.topic)
        .option("properties.bootstrap.servers", topic.bootstrap_servers)
        .option("properties.group.id", f"streamagents-replay-{uuid.uuid4().hex[:12]}")
        .option("scan.startup.mode", "earliest-offset")
        .option("scan.bounded.mode", "latest-offset")
        .option("value.format", "raw")
    )
    # an exactly-once log holds aborted transactions' events too: read only committed ones
    for key, value in {"isolation.level": "read_committed", **topic.properties}.items():
        source = source.option(f"properties.{key}", value)
    t_env.create_temporary_table("event_log_topic", source.build())
    sink = (
        TableDescriptor.for_connector("filesystem")
        .schema(
            Schema.new_builder()
            .column("partition", DataTypes.INT())
            .column("offset", DataTypes.BIGINT())
            .column("value", DataTypes.BYTES())
            .build()
        )
        .option("path", str(folder))
        .format("json")
        .build()
    )
    t_env.create_temporary_table("event_log_copy", sink)
    result: Any = t_env.from_path("event_log_topic").execute_insert("event_log_copy")
    result.wait()
