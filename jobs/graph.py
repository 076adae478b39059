"""The job builder: the only place a validated spec meets `StreamExecutionEnvironment`.

source -> agent operator (parse, key_by, agent) -> outputs / dead letters (JSONL, exactly
once); the agent function writes the Avro event log itself. Operator names are fixed
(`source`, `outputs`, `dead-letters`) so progress reporting can find their metrics.
"""

from __future__ import annotations

import re
from pathlib import Path

from pyflink.common import Configuration
from pyflink.datastream import DataStream, StreamExecutionEnvironment

from streamagents.connectors.files import jsonl_sink, jsonl_source, kafka_source
from streamagents.jobs.spec import JobSpec, LoadedSpec
from streamagents.operators.agent import AgentConfig, AgentRuntime, ModelSpec
from streamagents.operators.flink import (
    RuntimeFactory,
    agent_stream,
    configure_environment,
    event_log_writer,
)

__all__ = [
    "DEAD_LETTERS_NAME",
    "OUTPUTS_NAME",
    "SOURCE_NAME",
    "agent_config",
    "build_job",
    "flink_configuration",
]

SOURCE_NAME = "source"
OUTPUTS_NAME = "outputs"
DEAD_LETTERS_NAME = "dead-letters"


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def _uri(path_or_uri: str) -> str:
    """A URI as given (`file:/x`, `s3://b/x`, ...), a local path as a `file://` URI."""
    return path_or_uri if _SCHEME.match(path_or_uri) else Path(path_or_uri).resolve().as_uri()


def flink_configuration(
    spec: JobSpec, *, rest_port: int | None = None, restore_from: str | None = None
) -> Configuration:
    """The Flink configuration a spec asks for: checkpoints, state backend, parallelism."""
    config = Configuration()
    checkpointing = spec.checkpointing
    config.set_string("pipeline.name", spec.name)
    config.set_string("parallelism.default", str(spec.parallelism))
    config.set_string(
        "execution.checkpointing.interval", f"{int(checkpointing.interval_s * 1000)} ms"
    )
    config.set_string("state.backend.type", checkpointing.backend)
    if checkpointing.dir is not None:
        config.set_string("execution.checkpointing.dir", _uri(checkpointing.dir))
    if restore_from is not None:
        config.set_string("execution.state-recovery.path", _uri(restore_from))
    if rest_port is not None:
        config.set_string("rest.port", str(rest_port))
        config.set_string("rest.bind-port", str(rest_port))
        config.set_string("rest.bind-address", "localhost")
    configure_environment(config)
    return config


def agent_config(loaded: LoadedSpec, model: ModelSpec) -> AgentConfig:
    """The operator's `AgentConfig` for a spec and its resolved model."""
    spec = loaded.spec
    agent = spec.agent
    level = spec.event_log.level if spec.event_log is not None else "off"
    return AgentConfig(
        job_id=spec.name,
        model=model,
        system_prompt=agent.system_prompt,
        tools=list(agent.tools),
        key_field=spec.key,
        max_in_flight=agent.max_in_flight,
        memory=agent.memory,
        budgets=agent.budgets,
        media_store=spec.media_store,
        offload_threshold_bytes=agent.offload_threshold_bytes,
        input_limits=agent.input_limits,
        event_log_level=level,
        tool_timeout_s=agent.tool_timeout_s,
        max_tool_result_bytes=agent.max_tool_result_bytes,
    )


def _source(env: StreamExecutionEnvironment, spec: JobSpec) -> DataStream:
    files, kafka = spec.source.files, spec.source.kafka
    if files is not None:
        return jsonl_source(
            env, files.path, watch_interval_s=files.watch_interval_s, name=SOURCE_NAME
        )
    assert kafka is not None  # SourceSpec guarantees exactly one
    return kafka_source(env, **kafka.model_dump(), name=SOURCE_NAME)


def build_job(
    env: StreamExecutionEnvironment,
    loaded: LoadedSpec,
    model: ModelSpec,
    runtime_factory: RuntimeFactory = AgentRuntime.from_config,
) -> None:
    """Add the spec's whole pipeline to `env` (call `env.execute` afterwards).

    `runtime_factory` replaces the runtime built from the config (benchmarks give a test
    double this way)."""
    spec = loaded.spec
    env.set_parallelism(spec.parallelism)
    event_log = spec.event_log
    writer = None
    if event_log is not None:  # level "off" writes nothing
        rolling = event_log.model_dump(include={"roll_bytes", "roll_seconds"}, exclude_none=True)
        writer = event_log_writer(event_log.path, level=event_log.level, **rolling)
    config = agent_config(loaded, model)
    streams = agent_stream(_source(env, spec), config, runtime_factory, event_log=writer)
    jsonl_sink(streams.outputs, spec.sinks.outputs.path, prefix="answers", name=OUTPUTS_NAME)
    jsonl_sink(
        streams.dead_letters,
        spec.sinks.dead_letters.path,
        prefix="dead-letters",
        name=DEAD_LETTERS_NAME,
    )
