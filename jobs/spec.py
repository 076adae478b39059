"""The YAML job spec: a whole streaming agent job — source, key, agent, sinks — as plain data.

`load_spec(path)` reads a YAML file, substitutes `${ENV}` variables, validates it into a
frozen `JobSpec` and picks the model to use, before any Flink object exists. Every problem
is reported as `file:line: field: what was expected`, an unknown key comes with the
nearest valid key, and values taken from the environment never appear in a message.
Relative paths in the spec are relative to the spec file's directory.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from streamagents.connectors.connector_jars import JarFetchError, cached_jar
from streamagents.connectors.mcp_servers import McpMissingError, McpServer, require_mcp
from streamagents.connectors.providers import PROVIDER_NAMES, adapter_class
from streamagents.connectors.record_offload import DEFAULT_MAX_RECORD_BYTES, MIN_MAX_RECORD_BYTES
from streamagents.jobs._telemetry_env import TelemetryEnvError, telemetry_config
from streamagents.jobs._yaml_source import (
    FieldPath,
    LoadedYaml,
    YamlRuleError,
    YamlSyntaxError,
    load_yaml,
)
from streamagents.operators.agent.call_cost import unpriced_models
from streamagents.operators.agent.config import (
    LONGEST_WAIT_S,
    SPEND_BUDGETS,
    AgentConfig,
    AgentSettings,
    BuiltinTools,
    ContextCacheConfig,
    FallbackModel,
    InputMedia,
    ModelSpec,
    OtlpEndpoint,
    SampleRatio,
    TelemetryConfig,
    ToolRef,
    fallback_extras_problem,
    followup_key_problem,
    gemini_extras_problem,
    live_replay_problem,
)
from streamagents.operators.agent.tools import load_tool
from streamagents.operators.telemetry.sdk_spans import OtelMissingError, require_otel
from streamagents.serde.avro import LogLevel
from streamagents.serde.safe_text import redact_secrets

__all__ = [
    "AgentSpec",
    "CheckpointSpec",
    "EventLogSpec",
    "FilesSourceSpec",
    "JobSpec",
    "KafkaSinkSpec",
    "KafkaSourceSpec",
    "LoadedSpec",
    "ModelEntry",
    "SinkSpec",
    "SinksSpec",
    "SourceSpec",
    "SpecError",
    "SpecProblem",
    "TelemetrySpec",
    "check_runnable",
    "kafka_parts",
    "load_spec",
]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _resolve_path(value: str, info: ValidationInfo) -> str:
    """Make a relative local path absolute against the spec's directory; keep URIs."""
    if _URI.match(value):
        return value
    base = Path((info.context or {}).get("base_dir", "."))
    return str((base / Path(value).expanduser()).resolve())


PathOrUri = Annotated[str, Field(min_length=1), AfterValidator(_resolve_path)]
"""A local path (relative to the spec file) or a URI such as s3://bucket/prefix."""


def _local_only(value: str) -> str:
    if _URI.match(value):
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


class TelemetrySpec(_SpecModel):
    """Live OpenTelemetry traces and metrics from the running job (needs `streamagents[otel]`);
    a field left out comes from the standard `OTEL_*` environment variables."""

    otlp_endpoint: OtlpEndpoint | None = Field(
        default=None,
        description="OTLP/HTTP collector URL (default: $OTEL_EXPORTER_OTLP_ENDPOINT).",
    )
    headers: dict[str, SecretStr] | None = Field(
        default=None,
        description="HTTP headers for the collector, secrets (default: "
        "$OTEL_EXPORTER_OTLP_HEADERS).",
    )
    sample_ratio: SampleRatio | None = Field(
        default=None, description="Share of runs traced (default 1)."
    )
    capture_content: bool | None = Field(
        default=None, description="Message text and tool arguments/results in spans (off)."
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


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec: where it is and what was expected."""

    line: int | None
    field: str
    message: str


class SpecError(ValueError):
    """A spec that cannot be used; `str()` lists each problem as `file:line: field: message`."""

    def __init__(self, file: str, problems: list[SpecProblem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__(str(self))

    def __str__(self) -> str:
        lines = []
        for p in self.problems:
            where = f"{self.file}:{p.line}" if p.line else self.file
            lines.append(f"{where}: {p.field}: {p.message}" if p.field else f"{where}: {p.message}")
        return "\n".join(lines)


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec, the file it came from, and the model chosen among the candidates."""

    spec: JobSpec
    path: Path
    model: ModelEntry
    source: LoadedYaml
    telemetry: TelemetryConfig | None = None
    """The telemetry the job sends: the spec's `telemetry` block and the `OTEL_*` variables."""

    @property
    def base_dir(self) -> Path:
        """The spec file's directory, against which relative paths were resolved."""
        return self.path.parent

    def redact(self, text: str) -> str:
        """`text` with every value taken from the environment replaced by its `${NAME}`, and
        anything else shaped like a secret (a password in a URL) redacted."""
        return redact_secrets(self.source.redact(text))


def load_spec(path: str | Path, environ: Mapping[str, str] | None = None) -> LoadedSpec:
    """Read, interpolate and validate a job spec; raises `SpecError` naming every problem."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            str(file), [SpecProblem(None, "", f"cannot read: {exc.strerror}")]
        ) from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            str(file), [SpecProblem(None, "", f"not UTF-8 text (byte {exc.start})")]
        ) from None
    try:
        loaded = load_yaml(text, environ)
    except YamlSyntaxError as exc:
        raise SpecError(str(file), [SpecProblem(exc.line, "", f"not valid YAML: {exc}")]) from None
    except YamlRuleError as exc:
        raise SpecError(
            str(file), [SpecProblem(exc.line, _dotted(exc.path), exc.message)]
        ) from None
    if not isinstance(loaded.data, dict):
        raise SpecError(str(file), [SpecProblem(1, "", "expected a mapping of keys at the top")])
    try:
        spec = JobSpec.model_validate(loaded.data, context={"base_dir": str(file.resolve().parent)})
    except ValidationError as exc:
        problems = sorted(
            (_problem(error, loaded) for error in exc.errors()), key=lambda p: p.line or 0
        )
        raise SpecError(str(file), _redacted(problems, loaded)) from None
    model = _choose_model(spec, loaded, str(file))
    try:
        given = None if spec.telemetry is None else dict(spec.telemetry)
        telemetry = telemetry_config(given, os.environ if environ is None else environ)
    except TelemetryEnvError as exc:
        line = loaded.source_map.line_of(("telemetry",)) if spec.telemetry else None
        raise SpecError(str(file), [SpecProblem(line, "telemetry", str(exc))]) from None
    return LoadedSpec(
        spec=spec, path=file.resolve(), model=model, source=loaded, telemetry=telemetry
    )


def check_runnable(loaded: LoadedSpec, *, replay: bool = False) -> None:
    """Import every tool the spec names and check the chosen model's provider is installed
    (its options were checked on loading); raises `SpecError` naming each problem. For a
    `replay` job, whose runs never park (the recording decides), tools that need approval
    need no open input."""
    spec_dir = str(loaded.base_dir)
    if spec_dir not in sys.path:
        sys.path.append(spec_dir)
    problems = []
    approving = False
    provider = loaded.model.wire
    try:
        adapter_class(provider)
    except (ValueError, ImportError) as exc:
        index = loaded.spec.agent.model.index(loaded.model)
        path = ("agent", "model", index, "provider")
        problems.append(
            SpecProblem(
                loaded.source.source_map.line_of(_yaml_path(path, loaded.source.data)),
                _dotted(_yaml_path(path, loaded.source.data)),
                f"provider {provider!r} is not available in this installation ({exc})",
            )
        )
    problems += _fallback_problems(loaded)
    for index, target in enumerate(loaded.spec.agent.tools):
        try:
            found = load_tool(target.ref)
        except Exception as exc:
            line = loaded.source.source_map.line_of(("agent", "tools", index))
            problems.append(SpecProblem(line, f"agent.tools[{index}]", str(exc)))
            continue
        declared = (
            found.requires_approval if target.approval is None else target.approval == "required"
        )
        approving = approving or bool(declared)
        problem = live_replay_problem(target.replay, bool(declared), target.side_effects)
        if problem is not None:
            line = loaded.source.source_map.line_of(("agent", "tools", index))
            problems.append(SpecProblem(line, f"agent.tools[{index}]", problem))
        if declared and loaded.spec.sinks.approval_requests is None:
            line = loaded.source.source_map.line_of(("agent", "tools", index))
            problems.append(
                SpecProblem(
                    line,
                    f"agent.tools[{index}]",
                    f"tool {found.name!r} declares that its calls need approval, but "
                    "sinks.approval_requests is not set",
                )
            )
    problems += _mcp_approval_problems(loaded)
    problems += _unpriced_budget_problems(loaded)
    approving = approving or any(_approving(server) for server in loaded.spec.agent.mcp_servers)
    problems += _parked_key_problems(loaded, approving)
    problems += _read_once_problems(loaded, approving and not replay)
    problems += _kafka_problems(loaded)
    if loaded.spec.agent.mcp_servers:
        try:
            require_mcp()
        except McpMissingError as exc:
            line = loaded.source.source_map.line_of(("agent", "mcp_servers"))
            problems.append(SpecProblem(line, "agent.mcp_servers", str(exc)))
    if loaded.telemetry is not None:
        try:
            require_otel()
        except OtelMissingError as exc:
            line = loaded.source.source_map.line_of(("telemetry",))
            given = "set" if loaded.spec.telemetry is not None else "set by OTEL_* variables"
            problems.append(SpecProblem(line, "telemetry", f"{given}, but {exc}"))
    if problems:
        raise SpecError(str(loaded.path), _redacted(problems, loaded.source))


def _approving(server: McpServer) -> bool:
    """Whether some call of the server's tools may wait for a person's decision."""
    return server.approval == "required" or "required" in server.tool_approval.values()


def _mcp_approval_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """MCP servers whose tools need approval in a spec that has nowhere to ask for it."""
    if loaded.spec.sinks.approval_requests is not None:
        return []
    return [
        SpecProblem(
            loaded.source.source_map.line_of(("agent", "mcp_servers", index)),
            f"agent.mcp_servers[{index}]",
            f"MCP server {server.name!r} has tools whose calls need approval, but "
            "sinks.approval_requests is not set",
        )
        for index, server in enumerate(loaded.spec.agent.mcp_servers)
        if _approving(server)
    ]


def _unpriced_budget_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """Cost budgets over a chosen model (or fallback) that has no price: its calls would
    count nothing against them, so the budget would not hold."""
    unpriced = unpriced_models(loaded.model)
    if not unpriced:
        return []
    budgets = loaded.spec.agent.budgets
    problems = []
    for name in SPEND_BUDGETS:
        budget = getattr(budgets, name)
        if budget is None or budget.cost is None:
            continue
        path = ("agent", "budgets", name, "cost")
        problems.append(
            SpecProblem(
                loaded.source.source_map.line_of(path),
                _dotted(path),
                f"a cost budget needs prices, but model {unpriced[0]!r} has none in the "
                "published table and the spec sets none: its calls would count nothing "
                "against it; set its prices (agent.model.prices) or budget tokens instead",
            )
        )
    return problems


def _fallback_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """The chosen model's fallbacks whose provider is not installed, named before the job
    starts."""
    problems = []
    index = loaded.spec.agent.model.index(loaded.model)
    for number, fallback in enumerate(loaded.model.fallbacks):
        where = ("agent", "model", index, "fallbacks", number)
        try:
            adapter_class(fallback.provider)
        except (ValueError, ImportError) as exc:
            path = _yaml_path((*where, "provider"), loaded.source.data)
            problems.append(
                SpecProblem(
                    loaded.source.source_map.line_of(path),
                    _dotted(path),
                    f"provider {fallback.provider!r} is not available in this installation ({exc})",
                )
            )
    return problems


def _parked_key_problems(loaded: LoadedSpec, approving: bool) -> list[SpecProblem]:
    """Settings for keys with a parked run, set on an agent none of whose tools parks a run."""
    agent = loaded.spec.agent
    if approving:
        return []
    problems = []
    for name in ("while_parked", "max_inputs_per_parked_key"):
        if name in agent.model_fields_set:
            problems.append(
                SpecProblem(
                    loaded.source.source_map.line_of(("agent", name)),
                    f"agent.{name}",
                    f"{name} applies to runs parked for an approval, but no tool of this "
                    "agent needs approval; remove it or mark a tool `approval: required`",
                )
            )
    return problems


def _read_once_problems(loaded: LoadedSpec, approving: bool) -> list[SpecProblem]:
    """A job whose runs wait for people or for time (approvals, follow-ups) needs inputs that
    stay open: a source read once ends the job when its inputs are answered, and decisions
    read once never see what a person writes later."""
    spec, line_of = loaded.spec, loaded.source.source_map.line_of
    waits = []
    if approving:
        waits.append("runs wait for approvals (a tool needs approval)")
    elif spec.approvals is not None:
        waits.append("runs wait for approvals (approvals is set)")
    if spec.agent.followups.enabled:
        waits.append("follow-ups wait for their due time (agent.followups.enabled)")
    problems = []
    files = spec.source.files
    if waits and files is not None and files.watch_interval_s is None:
        problems.append(
            SpecProblem(
                line_of(("source", "files")),
                "source.files",
                f"{' and '.join(waits)}, but the input is read once: the job would end once "
                "its inputs are answered, leaving them as ApprovalPending / FollowupPending "
                "dead letters; set source.files.watch_interval_s (e.g. 1) so the job runs "
                "until you stop it (`run` again continues it), or read from Kafka",
            )
        )
    decisions = spec.approvals.files if spec.approvals is not None else None
    if decisions is not None and decisions.watch_interval_s is None:
        problems.append(
            SpecProblem(
                line_of(("approvals", "files")),
                "approvals.files",
                "decisions are read once, when the job starts, so a decision written later "
                "never arrives; set approvals.files.watch_interval_s (e.g. 1)",
            )
        )
    return problems


def kafka_parts(spec: JobSpec) -> dict[FieldPath, KafkaSourceSpec | KafkaSinkSpec]:
    """The spec's Kafka source and sinks (event log included) by their path in the YAML."""
    parts: dict[FieldPath, KafkaSourceSpec | KafkaSinkSpec] = {}
    if spec.source.kafka is not None:
        parts["source", "kafka"] = spec.source.kafka
    if spec.approvals is not None and spec.approvals.kafka is not None:
        parts["approvals", "kafka"] = spec.approvals.kafka
    for name in ("outputs", "dead_letters", "approval_requests"):
        sink = getattr(spec.sinks, name)
        if sink is not None and sink.kafka is not None:
            parts["sinks", name, "kafka"] = sink.kafka
    if spec.event_log is not None and spec.event_log.kafka is not None:
        parts["event_log", "kafka"] = spec.event_log.kafka
    return parts


def _kafka_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """The job's Kafka parts need a connector jar (one a part names, which serves them all,
    or the fetched one), a named jar must exist, and an exactly-once sink's transactions
    must outlive a checkpoint interval."""
    problems = []
    line_of = loaded.source.source_map.line_of
    interval_s = loaded.spec.checkpointing.interval_s
    parts = kafka_parts(loaded.spec)
    any_named = any(part.connector_jar is not None for part in parts.values())
    for path, part in parts.items():
        if part.connector_jar is None and not any_named:
            try:
                missing = cached_jar("kafka") is None
                reason = (
                    "no Kafka connector jar in the cache; run `streamagents jars fetch kafka` "
                    "(or set connector_jar)"
                )
            except JarFetchError as exc:
                missing, reason = True, f"no Kafka connector jar: {exc}; set connector_jar"
            if missing:
                problems.append(SpecProblem(line_of(path), _dotted(path), reason))
        elif (
            part.connector_jar is not None
            and not _URI.match(part.connector_jar)
            and not Path(part.connector_jar).is_file()
        ):
            where = (*path, "connector_jar")
            problems.append(
                SpecProblem(
                    line_of(where),
                    _dotted(where),
                    f"no such file: {part.connector_jar}; run `streamagents jars fetch kafka` "
                    "and leave connector_jar unset to use the cached jar",
                )
            )
        if (
            isinstance(part, KafkaSinkSpec)
            and part.delivery == "exactly-once"
            and part.transaction_timeout_s <= interval_s
        ):
            where = (*path, "transaction_timeout_s")
            problems.append(
                SpecProblem(
                    line_of(where),
                    _dotted(where),
                    f"the transaction timeout ({part.transaction_timeout_s:g} s) must be longer "
                    f"than checkpointing.interval_s ({interval_s:g} s): transactions are "
                    "committed on checkpoints, and Kafka aborts one that outlives its timeout",
                )
            )
    return problems


def _choose_model(spec: JobSpec, loaded: LoadedYaml, file: str) -> ModelEntry:
    single = isinstance(_raw_at(loaded.data, ("agent", "model")), Mapping)
    problems: list[SpecProblem] = []
    for path, names in loaded.missing.items():
        if path[:2] != ("agent", "model"):
            problems.append(_missing_env(path, names, loaded))
    if problems:
        raise SpecError(file, problems)
    for index, entry in enumerate(spec.agent.model):
        prefix = ("agent", "model") if single else ("agent", "model", index)
        if not any(path[: len(prefix)] == prefix for path in loaded.missing):
            return entry
    lead = "" if single else "no model candidate is usable: "
    raise SpecError(
        file, [_missing_env(path, names, loaded, lead) for path, names in loaded.missing.items()]
    )


def _missing_env(
    path: FieldPath, names: list[str], loaded: LoadedYaml, lead: str = ""
) -> SpecProblem:
    variables = ", ".join(sorted(set(names)))
    return SpecProblem(
        loaded.source_map.line_of(path),
        _dotted(path),
        f"{lead}environment variable {variables} is not set; export it, or write "
        "${NAME:-default} to give a default",
    )


def _redacted(problems: list[SpecProblem], loaded: LoadedYaml) -> list[SpecProblem]:
    return [SpecProblem(p.line, p.field, loaded.redact(p.message)) for p in problems]


def _problem(error: Mapping[str, Any], loaded: LoadedYaml) -> SpecProblem:
    loc = _yaml_path(tuple(error["loc"]), loaded.data)
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        valid = _valid_keys(tuple(error["loc"])[:-1])
        hint = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        lead = f"unknown key {key!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
        return SpecProblem(
            loaded.source_map.line_of(loc), _dotted(loc), f"{lead} (valid: {', '.join(valid)})"
        )
    if kind == "missing":
        return SpecProblem(
            loaded.source_map.line_of(loc[:-1]),
            _dotted(loc),
            f"required key {str(loc[-1])!r} is missing",
        )
    message = str(error["msg"])
    message = re.sub(r"^(Value error|Assertion failed), ", "", message)
    message = re.sub(r"^Input should be ", "expected ", message)
    message = re.sub(r"^String should ", "expected a string that should ", message)
    if kind.endswith("_type") or kind.endswith("_parsing"):
        message += f" (got {_type_name(error.get('input'))})"
    if kind == "literal_error" and isinstance(error.get("input"), str):
        choices = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        hint = difflib.get_close_matches(error["input"], choices, n=1, cutoff=0.5)
        if hint:
            message += f"; did you mean {hint[0]!r}?"
    return SpecProblem(loaded.source_map.line_of(loc), _dotted(loc), message)


def _type_name(value: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false"}
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return names.get(type(value), type(value).__name__)


def _yaml_path(loc: tuple[Any, ...], raw: Any) -> FieldPath:
    """The pydantic error location as a path in the YAML (a single model is not a list)."""
    path: list[str | int] = []
    for element in loc:
        if isinstance(element, int) and isinstance(raw, Mapping):
            continue
        path.append(element)
        if isinstance(raw, Mapping):
            raw = raw.get(element)
        elif isinstance(raw, list) and isinstance(element, int) and element < len(raw):
            raw = raw[element]
        else:
            raw = None
    return tuple(path)


def _raw_at(raw: Any, path: FieldPath) -> Any:
    for element in path:
        raw = raw.get(element) if isinstance(raw, Mapping) else None
    return raw


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the spec model found at `loc` (the mapping holding a bad key)."""
    current: Any = JobSpec
    for element in loc:
        if isinstance(element, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(element))
        if field is None:
            return []
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The pydantic model class inside an annotation such as `X | None` or `list[X]`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _model_in(get_args(annotation)[0])
    if origin in (list, Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if isinstance(found, type) and issubclass(found, BaseModel):
                return found
    return annotation


def _dotted(path: FieldPath) -> str:
    text = ""
    for element in path:
        text += f"[{element}]" if isinstance(element, int) else (f".{element}" if text else element)
    return text
