"""The job builder: the only place a validated spec meets `StreamExecutionEnvironment`.

source (JSONL files or Kafka) -> agent operator (parse, key_by, agent) -> outputs / dead
letters (JSONL files or Kafka topics, exactly once) and events (the Avro event log: in
files, which the agent function writes itself, or as single-object messages on a topic).
Operator names are fixed (`source`, `outputs`, `dead-letters`) so progress reporting can
find their metrics.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import SecretStr
from pyflink.common import Configuration, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment

from streamagents.connectors.connector_jars import cached_jar
from streamagents.connectors.files import jsonl_sink, jsonl_source
from streamagents.connectors.kafka import (
    KafkaTopic,
    add_connector_jar,
    kafka_keyed_sink,
    kafka_sink,
    kafka_source,
)
from streamagents.jobs.eventlog_topic import MESSAGE_TYPE, EventMessages
from streamagents.jobs.spec import (
    JobSpec,
    KafkaSinkSpec,
    LoadedSpec,
    SinkSpec,
    SourceSpec,
    kafka_parts,
)
from streamagents.operators.agent import AgentConfig, AgentRuntime, ModelSpec
from streamagents.operators.flink import (
    BACKLOG_SETTINGS,
    RuntimeFactory,
    agent_stream,
    configure_environment,
    event_log_writer,
)
from streamagents.operators.flink.bounded_records import BoundRecords

__all__ = [
    "APPROVALS_NAME",
    "APPROVAL_REQUESTS_NAME",
    "DEAD_LETTERS_NAME",
    "EVENT_LOG_NAME",
    "OUTPUTS_NAME",
    "SOURCE_NAME",
    "agent_config",
    "bounded_input",
    "build_job",
    "flink_configuration",
]

SOURCE_NAME = "source"
OUTPUTS_NAME = "outputs"
DEAD_LETTERS_NAME = "dead-letters"
EVENT_LOG_NAME = "event-log"
APPROVALS_NAME = "approvals"
APPROVAL_REQUESTS_NAME = "approval-requests"


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def _uri(path_or_uri: str) -> str:
    """A URI as given (`file:/x`, `s3://b/x`, ...), a local path as a `file://` URI."""
    return path_or_uri if _SCHEME.match(path_or_uri) else Path(path_or_uri).resolve().as_uri()


def flink_configuration(
    spec: JobSpec,
    *,
    rest_port: int | None = None,
    restore_from: str | None = None,
    checkpoint_dir: str | None = None,
) -> Configuration:
    """The Flink configuration a spec asks for: checkpoints, state backend, parallelism;
    `checkpoint_dir` is where checkpoints go when the spec names no directory."""
    config = configure_environment(Configuration())
    checkpointing = spec.checkpointing
    config.set_string("pipeline.name", spec.name)
    config.set_string("parallelism.default", str(spec.parallelism))
    config.set_string(
        "execution.checkpointing.interval", f"{int(checkpointing.interval_s * 1000)} ms"
    )
    config.set_string(
        "execution.checkpointing.timeout", f"{int(checkpointing.timeout_s * 1000)} ms"
    )
    if not checkpointing.unaligned:
        for key in BACKLOG_SETTINGS:
            if key.startswith("execution.checkpointing."):
                config.set_string(key, "false")
    config.set_string("state.backend.type", checkpointing.backend)
    directory = checkpointing.dir if checkpointing.dir is not None else checkpoint_dir
    if directory is not None:
        config.set_string("execution.checkpointing.dir", _uri(directory))
    if restore_from is not None:
        config.set_string("execution.state-recovery.path", _uri(restore_from))
    if rest_port is not None:
        config.set_string("rest.port", str(rest_port))
        config.set_string("rest.bind-port", str(rest_port))
        config.set_string("rest.bind-address", "localhost")
    return config


def agent_config(loaded: LoadedSpec, model: ModelSpec, *, replay: bool = False) -> AgentConfig:
    """The operator's `AgentConfig` for a spec and its resolved model: the spec's agent
    settings as they are, with what the job around the agent decides (`replay`: a replay
    job's, see `streamagents.jobs.replay.lines`)."""
    spec = loaded.spec
    return AgentConfig(
        **spec.agent.settings(),
        job_id=spec.name,
        model=model,
        key_field=spec.key,
        media_store=spec.media_store,
        input_media=spec.source.media,
        event_log_level=spec.event_log.level if spec.event_log is not None else "off",
        telemetry=loaded.telemetry,
        replay=replay,
        known_secrets=tuple(SecretStr(value) for value in loaded.secret_values()),
    )


def _add_kafka_jar(env: StreamExecutionEnvironment, spec: JobSpec) -> None:
    """Put the Kafka connector jar on the classpath if a Kafka part needs it: the first one
    a part names (it serves every part), else the cached one (`check_runnable` made sure
    there is one)."""
    parts = kafka_parts(spec).values()
    if not parts:
        return
    named = [part.connector_jar for part in parts if part.connector_jar is not None]
    jar = named[0] if named else str(cached_jar("kafka"))
    add_connector_jar(env, jar)


def bounded_input(spec: JobSpec) -> bool:
    """Whether the spec's input ends by itself: files, not watched for more."""
    files = spec.source.files
    return files is not None and files.watch_interval_s is None


def _source(
    env: StreamExecutionEnvironment, source: SourceSpec, name: str = SOURCE_NAME
) -> DataStream:
    files, kafka = source.files, source.kafka
    if files is not None:
        return jsonl_source(env, files.path, watch_interval_s=files.watch_interval_s, name=name)
    assert kafka is not None  # SourceSpec guarantees exactly one
    settings = kafka.model_dump(exclude={"connector_jar"})
    return kafka_source(env, **settings, name=name)


def _decisions(env: StreamExecutionEnvironment, spec: JobSpec) -> DataStream | None:
    """The job's approvals source (decisions only), if any.

    A local folder of decision files is created when missing: it starts empty, an inbox."""
    if spec.approvals is None:
        return None
    files = spec.approvals.files
    if files is not None and not _SCHEME.match(files.path) and not Path(files.path).exists():
        Path(files.path).mkdir(parents=True)
    return _source(env, spec.approvals, APPROVALS_NAME)


def _kafka_topic(kafka: KafkaSinkSpec, spec: JobSpec, name: str) -> KafkaTopic:
    """A Kafka sink's settings; the transactional id prefix defaults to `<job>-<name>`."""
    return KafkaTopic(
        topic=kafka.topic,
        bootstrap_servers=kafka.bootstrap_servers,
        delivery=kafka.delivery,
        transactional_id_prefix=kafka.transactional_id_prefix or f"{spec.name}-{name}",
        transaction_timeout_s=kafka.transaction_timeout_s,
        properties=kafka.properties,
    )


def _sink(stream: DataStream, spec: JobSpec, sink: SinkSpec, *, prefix: str, name: str) -> None:
    """Write JSON records to a sink, each within its `max_record_bytes` (see `BoundRecords`)."""
    bound = BoundRecords(spec.media_store, sink.max_record_bytes)
    bounded = stream.map(bound, output_type=Types.STRING())
    stream = bounded.name(f"{name}-bound").uid(f"{name}-bound")
    if sink.kafka is not None:
        kafka_sink(stream, _kafka_topic(sink.kafka, spec, name), name=name)
        return
    assert sink.path is not None  # SinkSpec guarantees a path or a topic
    jsonl_sink(stream, sink.path, prefix=prefix, name=name)


def build_job(
    env: StreamExecutionEnvironment,
    loaded: LoadedSpec,
    model: ModelSpec,
    runtime_factory: RuntimeFactory = AgentRuntime.from_config,
    *,
    hold_input_end: bool = False,
    replay: bool = False,
) -> None:
    """Add the spec's whole pipeline to `env` (call `env.execute` afterwards).

    `runtime_factory` replaces the runtime built from the config (benchmarks give a test
    double this way). With `hold_input_end`, a bounded input's end does not end the job:
    the caller stops it with a draining savepoint once every input is answered (see
    `jobs.cluster.job_stop`), so the last runs finish under regular checkpoints. With `replay`,
    every input runs as a replay of a recorded run (`streamagents replay`)."""
    spec = loaded.spec
    env.set_parallelism(spec.parallelism)
    _add_kafka_jar(env, spec)
    event_log = spec.event_log
    writer = None
    if event_log is not None and event_log.path is not None:  # level "off" writes nothing
        rolling = event_log.model_dump(include={"roll_bytes", "roll_seconds"}, exclude_none=True)
        writer = event_log_writer(event_log.path, level=event_log.level, **rolling)
    config = agent_config(loaded, model, replay=replay)
    streams = agent_stream(
        _source(env, spec.source),
        config,
        runtime_factory,
        event_log=writer,
        hold_input_end=hold_input_end and bounded_input(spec),
        decisions=_decisions(env, spec),
    )
    _sink(streams.outputs, spec, spec.sinks.outputs, prefix="answers", name=OUTPUTS_NAME)
    _sink(
        streams.dead_letters,
        spec,
        spec.sinks.dead_letters,
        prefix="dead-letters",
        name=DEAD_LETTERS_NAME,
    )
    if spec.sinks.approval_requests is not None:
        _sink(
            streams.approval_requests,
            spec,
            spec.sinks.approval_requests,
            prefix="approval-requests",
            name=APPROVAL_REQUESTS_NAME,
        )
    if event_log is None or event_log.kafka is None or event_log.level == "off":
        return
    encode = EventMessages(event_log.level, spec.media_store, event_log.max_record_bytes)
    messages = streams.events.map(encode, output_type=MESSAGE_TYPE)
    kafka_keyed_sink(
        messages.name(f"{EVENT_LOG_NAME}-encode").uid(f"{EVENT_LOG_NAME}-encode"),
        _kafka_topic(event_log.kafka, spec, EVENT_LOG_NAME),
        binary=True,
        name=EVENT_LOG_NAME,
    )
