"""The YAML job spec: its schema, loading it, the checks before it runs, and its errors.

`load_spec(path)` reads, interpolates and validates a spec; `check_runnable` checks what it
names can run here. Every problem is reported as `file:line: field: what was expected`, an
unknown key comes with the nearest valid key, and values taken from the environment never
appear in a message.
"""

from streamagents.jobs.spec.checks import check_runnable, kafka_parts
from streamagents.jobs.spec.errors import SpecError, SpecProblem
from streamagents.jobs.spec.loading import LoadedSpec, load_spec
from streamagents.jobs.spec.schema import (
    AgentSpec,
    CheckpointSpec,
    EventLogSpec,
    FilesSourceSpec,
    JobSpec,
    KafkaSinkSpec,
    KafkaSourceSpec,
    ModelEntry,
    SinkSpec,
    SinksSpec,
    SourceSpec,
    TelemetrySpec,
)

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
