"""The YAML job spec's schema: a whole streaming agent job — source, key, agent, sinks — as
frozen pydantic models (`JobSpec` and its parts). Relative paths in the spec are relative to
the spec file's directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from streamagents.connectors.providers import PROVIDER_NAMES
from streamagents.connectors.record_offload import DEFAULT_MAX_RECORD_BYTES, MIN_MAX_RECORD_BYTES
from streamagents.operators.agent.config import (
    LONGEST_WAIT_S,
    AgentConfig,
    AgentSettings,
    BuiltinTools,
    ContextCacheConfig,
    FallbackModel,
    InputMedia,
    ModelSpec,
    TelemetryConfig,
    ToolRef,
    fallback_extras_problem,
    followup_key_problem,
    gemini_extras_problem,
)
from streamagents.serde.avro import LogLevel

__all__ = [
    "URI_SCHEME",
    "AgentSpec",
    "CheckpointSpec",
    "EventLogSpec",
    "FilesSourceSpec",
    "JobSpec",
    "KafkaSinkSpec",
    "KafkaSourceSpec",
    "ModelEntry",
    "SinkSpec",
    "SinksSpec",
    "SourceSpec",
    "TelemetrySpec",
]

URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A value that starts with a URI scheme (`s3://`, `file://`): not a local path."""


def _resolve_path(value: str, info: ValidationInfo) -> str:
    """Make a relative local path absolute against the spec's directory; keep URIs."""
    if URI_SCHEME.match(value):
        return value
    base = Path((info.context or {}).get("base_dir", "."))
    return str((base / Path(value).expanduser()).resolve())


PathOrUri = Annotated[str, Field(min_length=1), AfterValidator(_resolve_path)]
"""A local path (relative to the spec file) or a URI such as s3://bucket/prefix."""


def _local_only(value: str) -> str:
    if URI_SCHEME.match(value):
        raise ValueError(
            "expected a local (or mounted) directory, not a URI: the event log appends to "
            "its open file, which object stores cannot do; write it to a local directory "
            "and copy the finished *.avro files (they never change once named) to the store"
        )
    return value


LocalPath = Annotated[
    str, Field(min_length=1), AfterValidator(_local_only), AfterValidator(_resolve_path)
]
"""A local path (relative to the spec file); a URI is refused."""


class _SpecModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    def _exactly_one_of(self, *names: str) -> None:
        """Raise unless exactly one of the fields `names` is set."""
        given = [name for name in names if getattr(self, name) is not None]
        if len(given) != 1:
            choices = " or ".join(repr(name) for name in names)
            raise ValueError(f"expected exactly one of {choices}, got {', '.join(given) or 'none'}")


class FilesSourceSpec(_SpecModel):
    """JSONL input files: one file, or every file in a directory (optionally watched)."""

    path: PathOrUri = Field(description="A JSONL file or a directory of JSONL files.")
    watch_interval_s: float | None = Field(
        default=None,
        gt=0,
        description="Keep watching the directory for new files at this interval; "
        "unset means read what is there and finish.",
    )


_CONNECTOR_JAR = (
    "Path of flink-sql-connector-kafka-*.jar; unset means the jar `streamagents jars fetch "
    "kafka` put in the cache."
)


class KafkaSourceSpec(_SpecModel):
    """A Kafka topic read through Flink's Kafka connector jar."""

    connector_jar: PathOrUri | None = Field(default=None, description=_CONNECTOR_JAR)
    topics: list[str] = Field(min_length=1, description="Topics to read.")
    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port...]")
    group_id: str = Field(min_length=1, description="Consumer group id.")
    starting_offsets: Literal["earliest", "latest", "committed"] = Field(
        default="committed",
        description="Where a job that restores no checkpoint starts: the group's committed "
        "offsets, or always the earliest or the latest offset.",
    )
    offset_reset: Literal["earliest", "latest", "none"] = Field(
        default="earliest",
        description="With committed offsets: where to start on a partition the group has "
        "committed nothing for (a new group); none fails the job there.",
    )
    properties: dict[str, str] = Field(
        default_factory=dict, description="Further Kafka client properties (may use ${ENV})."
    )

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            # Properties may hold ${ENV} secrets (sasl.jaas.config...): show names only.
            yield name, (sorted(value) if name == "properties" else value)

    @model_validator(mode="after")
    def _reset_only_with_committed(self) -> KafkaSourceSpec:
        if "offset_reset" in self.model_fields_set and self.starting_offsets != "committed":
            raise ValueError(
                f"offset_reset applies to starting_offsets: committed only; "
                f"{self.starting_offsets} starts there on every partition"
            )
        return self


class SourceSpec(_SpecModel):
    """Where input records come from: exactly one of `files` or `kafka`."""

    files: FilesSourceSpec | None = Field(default=None, description="JSONL files.")
    kafka: KafkaSourceSpec | None = Field(default=None, description="A Kafka topic.")
    media: InputMedia = Field(
        default_factory=InputMedia,
        description="Where its lines' media may come from: no media-store refs, https URLs "
        "of any host unless said otherwise (inputs are untrusted).",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> SourceSpec:
        self._exactly_one_of("files", "kafka")
        return self


class FallbackEntry(FallbackModel):
    """A fallback of a spec's model entry, whose unset `sdk_process` leaves the choice to
    where the job runs, as the entry's does."""

    model_config = _SpecModel.model_config

    sdk_process: bool | None = Field(
        default=None,
        description="Run the SDK's requests in a worker process of its own; unset: where the "
        "TaskManager may use two cores or more.",
    )

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            # Options may hold ${ENV} values: show which options are set, never their values.
            yield name, (sorted(value) if name == "options" else value)


class ModelEntry(ModelSpec):
    """One model the agent may use: a `ModelSpec` whose provider may also be `demo` (the
    test double on 127.0.0.1 that `responder` scripts), and whose unset `sdk_process` leaves
    the choice to where the job runs."""

    model_config = _SpecModel.model_config

    provider: Literal[(*PROVIDER_NAMES, "demo")] = Field(  # type: ignore[valid-type]
        description=f"{', '.join(PROVIDER_NAMES)}, or demo."
    )
    sdk_process: bool | None = Field(
        default=None,
        description="Run the SDK's requests in a worker process of its own, not under the "
        "TaskManager's GIL; unset: where the TaskManager may use two cores or more (never "
        "for the demo).",
    )
    responder: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description='demo only: "module:function" that scripts the test double\'s replies.',
    )
    fallbacks: list[FallbackEntry] = Field(  # type: ignore[assignment]
        default_factory=list,
        description="Models tried in order when this one fails with a failover condition.",
    )

    @property
    def wire(self) -> str:
        """The provider whose adapter serves this entry (the demo speaks the Gemini wire)."""
        return "gemini" if self.provider == "demo" else self.provider

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            # Options may hold ${ENV} values: show which options are set, never their values.
            yield name, (sorted(value) if name == "options" else value)

    @model_validator(mode="after")
    def _responder_only_for_demo(self) -> ModelEntry:
        if self.provider == "demo" and self.responder is None:
            raise ValueError("a demo model needs 'responder' (\"module:function\")")
        if self.provider != "demo" and self.responder is not None:
            raise ValueError("'responder' belongs to demo models only")
        return self


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, Mapping) else value


def _tool_entry(value: Any) -> Any:
    """A tool given as its bare import path means `{ref: path}`."""
    return {"ref": value} if isinstance(value, str) else value


class _ModelCandidates(_SpecModel):
    """The spec's `agent.model`: the candidates, of which the job uses one."""

    model: Annotated[list[ModelEntry], BeforeValidator(_one_or_many)] = Field(
        min_length=1,
        description="A model, or a list of candidates: the first whose ${ENV} variables "
        "are all set is used.",
    )


class AgentSpec(AgentSettings, _ModelCandidates):
    """The agent run for each input: the model candidates and the agent's settings, with
    tools written as import paths and documents relative to the spec.

    `_ModelCandidates` comes after `AgentSettings` among the bases so that `model` is the
    first field: it is validated before the settings that depend on the provider."""

    tools: list[Annotated[ToolRef, BeforeValidator(_tool_entry)]] = Field(
        default_factory=list,
        description='Tools by import path, "package.module:function", or as '
        "{ref: ..., approval: required | none, approval_timeout_s: ...}.",
    )
    documents: list[PathOrUri] = Field(
        default_factory=list,
        description="Documents (files relative to the spec, or URLs) sent first in every "
        "request; with context_cache on they live in the cache.",
    )

    @field_validator("builtin_tools", "context_cache")
    @classmethod
    def _gemini_only(cls, value: Any, info: ValidationInfo) -> Any:
        candidates = info.data.get("model") or []
        tools = value if isinstance(value, BuiltinTools) else BuiltinTools()
        cache = value if isinstance(value, ContextCacheConfig) else ContextCacheConfig()
        for index, entry in enumerate(candidates):
            problem = gemini_extras_problem(entry.provider, tools, cache)
            if problem is None and info.field_name == "builtin_tools":
                problem = fallback_extras_problem(entry, tools)
            if problem is not None:
                where = "" if len(candidates) == 1 else f" (agent.model[{index}])"
                raise ValueError(problem.split(": ", 1)[1] + where)
        return value


class KafkaSinkSpec(_SpecModel):
    """A Kafka topic written through Flink's Kafka sink, records keyed by the agent key."""

    topic: str = Field(min_length=1, description="Topic to write to.")
    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port...]")
    delivery: Literal["exactly-once", "at-least-once"] = Field(
        default="exactly-once",
        description="exactly-once: Kafka transactions committed on each checkpoint; "
        "at-least-once: records flushed on each checkpoint, duplicates after a restore.",
    )
    transaction_timeout_s: float = Field(
        default=900.0,
        gt=0,
        description="Kafka transaction timeout (exactly-once): above the checkpoint interval "
        "plus the longest restart, at most the broker's transaction.max.timeout.ms.",
    )
    transactional_id_prefix: str | None = Field(
        default=None,
        min_length=1,
        description="Prefix of the transactional ids; unset means `<job name>-<sink>`.",
    )
    connector_jar: PathOrUri | None = Field(default=None, description=_CONNECTOR_JAR)
    properties: dict[str, str] = Field(
        default_factory=dict, description="Further Kafka producer properties (may use ${ENV})."
    )

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            # Properties may hold ${ENV} secrets (sasl.jaas.config...): show names only.
            yield name, (sorted(value) if name == "properties" else value)


class EventLogSpec(_SpecModel):
    """Where and how much of each run the event log records: Avro files in a local
    directory (`path`) or Avro single-object messages on a Kafka topic (`kafka`)."""

    path: LocalPath | None = Field(
        default=None, description="Local directory of the event-log files (no URI)."
    )
    kafka: KafkaSinkSpec | None = Field(
        default=None, description="A Kafka topic of Avro single-object messages."
    )
    level: Literal[tuple(level.value for level in LogLevel)] = Field(  # type: ignore[valid-type]
        default=AgentConfig.model_fields["event_log_level"].default,
        description="standard keeps a bounded prefix of long texts, verbose keeps all, off none.",
    )
    roll_bytes: int | None = Field(default=None, ge=1, description="Roll a file at this size.")
    roll_seconds: float | None = Field(default=None, gt=0, description="Roll after this long.")
    max_record_bytes: int = Field(
        default=DEFAULT_MAX_RECORD_BYTES,
        ge=MIN_MAX_RECORD_BYTES,
        description="Topic only: most bytes of one message; a larger event is stored whole in "
        "the media store and its message keeps bounded texts and the ref.",
    )

    @model_validator(mode="after")
    def _path_or_topic(self) -> EventLogSpec:
        self._exactly_one_of("path", "kafka")
        if self.kafka is not None and (self.roll_bytes or self.roll_seconds):
            raise ValueError("roll_bytes and roll_seconds apply to event-log files, not a topic")
        if self.path is not None and "max_record_bytes" in self.model_fields_set:
            raise ValueError("max_record_bytes applies to an event-log topic, not files")
        return self

    def describe(self) -> str:
        """Where the events go, for a person: the directory, or `kafka topic T`."""
        return f"kafka topic {self.kafka.topic}" if self.kafka is not None else str(self.path)


class SinkSpec(_SpecModel):
    """One sink: a directory of JSONL part files (`path`) or a Kafka topic (`kafka`)."""

    path: PathOrUri | None = Field(
        default=None,
        description="Directory of JSONL part files, written exactly once by Flink's file sink.",
    )
    kafka: KafkaSinkSpec | None = Field(default=None, description="A Kafka topic.")
    max_record_bytes: int = Field(
        default=DEFAULT_MAX_RECORD_BYTES,
        ge=MIN_MAX_RECORD_BYTES,
        description="Most UTF-8 bytes of one record; a larger one keeps a prefix of its "
        "longest texts and the media-store refs of the whole (under Kafka's 1 MiB by default).",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> SinkSpec:
        self._exactly_one_of("path", "kafka")
        return self

    def describe(self) -> str:
        """Where the records go, for a person: the directory, or `kafka topic T`."""
        return f"kafka topic {self.kafka.topic}" if self.kafka is not None else str(self.path)


class SinksSpec(_SpecModel):
    """Where answers, dead letters and approval requests go."""

    outputs: SinkSpec = Field(description="One JSON record per finished run.")
    dead_letters: SinkSpec = Field(description="One JSON record per rejected input.")
    approval_requests: SinkSpec | None = Field(
        default=None,
        description="One JSON record per tool call that waits for a person's decision; "
        "required when a tool needs approval.",
    )


class CheckpointSpec(_SpecModel):
    """Checkpointing; the file sinks commit their files on each checkpoint."""

    interval_s: float = Field(
        default=5.0,
        gt=0,
        le=LONGEST_WAIT_S,
        allow_inf_nan=False,
        description="Seconds between checkpoints.",
    )
    dir: PathOrUri | None = Field(default=None, description="Checkpoint directory or URI.")
    backend: Literal["hashmap", "rocksdb"] = Field(default="hashmap", description="State backend.")
    unaligned: bool = Field(
        default=True,
        description=(
            "Unaligned checkpoints: a barrier overtakes the inputs waiting in network buffers"
            " (they become part of the checkpoint), so checkpoints complete while a backlog"
            " waits."
        ),
    )
    timeout_s: float = Field(
        default=600.0,
        gt=0,
        le=LONGEST_WAIT_S,
        allow_inf_nan=False,
        description="A checkpoint not complete after this many seconds fails.",
    )


def _each_optional(model: type[BaseModel], name: str, doc: str) -> type[_SpecModel]:
    """A spec block of `model`'s fields, each with its type and bounds but optional (None:
    left out): the block declares no field of its own, so a field added to `model` reaches
    the spec by itself."""

    def optional(info: FieldInfo) -> Any:
        kind = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        return (kind | None, Field(default=None, description=info.description))

    fields = {field: optional(info) for field, info in model.model_fields.items()}
    return create_model(name, __base__=_SpecModel, __doc__=doc, __module__=__name__, **fields)


TelemetrySpec = _each_optional(
    TelemetryConfig,
    "TelemetrySpec",
    "Live OpenTelemetry traces and metrics from the running job (needs `streamagents[otel]`):"
    " the operator's `TelemetryConfig`, each field optional; one left out comes from the"
    " standard `OTEL_*` environment variables (`jobs/telemetry/env.py`) or its default.",
)


class JobSpec(_SpecModel):
    """A whole streaming agent job."""

    name: str = Field(pattern=r"^[A-Za-z0-9][\w.-]*$", description="Job name.")
    source: SourceSpec = Field(description="Where input records come from.")
    key: str = Field(
        pattern=r"^[^.\s]+(\.[^.\s]+)*$",
        description="Dotted path of the field inputs are keyed by, e.g. customer.id.",
    )
    agent: AgentSpec = Field(description="The agent run for each input.")
    media_store: PathOrUri = Field(
        default=AgentConfig.model_fields["media_store"].default,
        description="Media store: path or URI.",
    )
    event_log: EventLogSpec | None = Field(default=None, description="The event log.")
    telemetry: TelemetrySpec | None = Field(
        default=None, description="Live OpenTelemetry traces and metrics."
    )
    sinks: SinksSpec = Field(description="Outputs and dead letters.")
    parallelism: int = Field(default=1, ge=1, description="Parallelism of the job.")
    checkpointing: CheckpointSpec = Field(
        default_factory=CheckpointSpec, description="Checkpoint interval, directory, backend."
    )
    approvals: SourceSpec | None = Field(
        default=None,
        description="The source of decisions on parked tool calls, keyed like the input: "
        "with it, decisions come from it only (see docs/approvals.md).",
    )

    @model_validator(mode="after")
    def _decisions_from_one_channel(self) -> JobSpec:
        if self.approvals is not None and self.agent.decisions.from_input:
            raise ValueError(
                "agent.decisions.from_input is set, but so is approvals: with an approvals "
                "source, decisions come from it only; remove one of them"
            )
        return self

    @model_validator(mode="after")
    def _approvals_have_a_sink(self) -> JobSpec:
        required = [entry.ref for entry in self.agent.tools if entry.approval == "required"]
        if self.sinks.approval_requests is None and (required or self.approvals is not None):
            what = f"tool {required[0]!r} needs approval" if required else "approvals is set"
            raise ValueError(
                f"{what}, but sinks.approval_requests is not set: without it nobody learns "
                "which calls wait for a decision"
            )
        return self

    @model_validator(mode="after")
    def _media_rules_on_the_input_source(self) -> JobSpec:
        if self.approvals is not None and "media" in self.approvals.model_fields_set:
            raise ValueError(
                "approvals.media has no effect: every line, decisions included, follows "
                "source.media"
            )
        return self

    @model_validator(mode="after")
    def _followup_lines_can_hold_the_key(self) -> JobSpec:
        problem = followup_key_problem(self.key, self.agent.followups)
        if problem is not None:
            raise ValueError(problem)
        return self
