"""Loading a job spec: `load_spec(path)` reads a YAML file, substitutes `${ENV}` variables,
validates it into a frozen `JobSpec`, picks the model to use among the candidates and completes
its telemetry from the `OTEL_*` variables, before any Flink object exists. The `${ENV}` values
that went into secret fields are the job's secret values (`LoadedSpec.secret_values`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from streamagents.jobs.spec.errors import (
    SpecError,
    SpecProblem,
    dotted,
    missing_env,
    raw_at,
    redacted,
    validation_problem,
)
from streamagents.jobs.spec.schema import JobSpec, ModelEntry
from streamagents.jobs.spec.yaml_source import LoadedYaml, YamlRuleError, YamlSyntaxError, load_yaml
from streamagents.jobs.telemetry.env import TelemetryEnvError, telemetry_config
from streamagents.operators.agent.config import TelemetryConfig
from streamagents.serde.safe_text import is_credential_name, redact_secrets, url_secrets

__all__ = ["LoadedSpec", "load_spec"]

_SECRET_MAPS = frozenset({"headers", "default_headers", "env", "properties"})
"""Keys whose every value is a secret: HTTP headers, an MCP server's environment, Kafka client
properties (`sasl.jaas.config`, `ssl.key.password`, ...)."""


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

    def secret_values(self) -> list[str]:
        """The `${ENV}` values the spec puts in secret fields, which nothing the job emits may
        carry: every value under a credential's name (`api_key`, `secret`, `password`, ...),
        in headers, an MCP server's `env` or Kafka `properties`, and the user info or query
        value of a URL that holds one."""
        values: list[str] = []
        for path, (text, names) in self.source.placed.items():
            given = [self.source.substituted[name] for name in names]
            keys = [key for key in path if isinstance(key, str)]
            if any(key in _SECRET_MAPS or is_credential_name(key) for key in keys):
                values += given
            else:  # a URL's credentials that hold a variable's value, or lie within one
                values += [
                    piece
                    for piece in url_secrets(text)
                    if any(value in piece or piece in value for value in given)
                ]
        return values


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
        raise SpecError(str(file), [SpecProblem(exc.line, dotted(exc.path), exc.message)]) from None
    if not isinstance(loaded.data, dict):
        raise SpecError(str(file), [SpecProblem(1, "", "expected a mapping of keys at the top")])
    try:
        spec = JobSpec.model_validate(loaded.data, context={"base_dir": str(file.resolve().parent)})
    except ValidationError as exc:
        problems = sorted(
            (validation_problem(error, loaded) for error in exc.errors()), key=lambda p: p.line or 0
        )
        raise SpecError(str(file), redacted(problems, loaded)) from None
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


def _choose_model(spec: JobSpec, loaded: LoadedYaml, file: str) -> ModelEntry:
    """The first model candidate whose `${ENV}` variables are all set; raises `SpecError`
    naming what is missing when none is, or when a variable outside the models is."""
    single = isinstance(raw_at(loaded.data, ("agent", "model")), Mapping)
    problems: list[SpecProblem] = []
    for path, names in loaded.missing.items():
        if path[:2] != ("agent", "model"):
            problems.append(missing_env(path, names, loaded))
    if problems:
        raise SpecError(file, problems)
    for index, entry in enumerate(spec.agent.model):
        prefix = ("agent", "model") if single else ("agent", "model", index)
        if not any(path[: len(prefix)] == prefix for path in loaded.missing):
            return entry
    lead = "" if single else "no model candidate is usable: "
    raise SpecError(
        file, [missing_env(path, names, loaded, lead) for path, names in loaded.missing.items()]
    )
