"""The telemetry a job sends: its spec's `telemetry` block, completed by the `OTEL_*` variables.

A field the spec leaves out comes from the variables the OpenTelemetry SDKs read
(`OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`,
`OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`);
`OTEL_SDK_DISABLED=true` turns telemetry off. With no block and no endpoint variable the
job sends nothing. Header values are secrets: an error names a variable, never a value.

This module only reads the variables: the fields, their types, bounds and defaults are
`TelemetryConfig`'s (`operators/agent/config.py`), which validates what it read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from pydantic import SecretStr, ValidationError

from streamagents.operators.agent.config import TelemetryConfig

__all__ = ["TelemetryEnvError", "telemetry_config"]

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_HEADERS = ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
_RATIO_SAMPLERS = ("traceidratio", "parentbased_traceidratio")
_OFF_SAMPLERS = ("always_off", "parentbased_always_off")
_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class TelemetryEnvError(ValueError):
    """The spec and the `OTEL_*` variables do not make a usable telemetry setting."""


def _first(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of the variables `names` that is set, and its value."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _headers(environ: Mapping[str, str]) -> tuple[str, dict[str, SecretStr]] | None:
    """`k=v,k2=v2` (values URL-encoded), as the OTLP exporter specification writes them."""
    found = _first(environ, _HEADERS)
    if found is None:
        return None
    name, text = found
    headers = {}
    for index, item in enumerate(text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TelemetryEnvError(f"{name}: entry {index + 1} is not NAME=VALUE")
        headers[unquote(key.strip())] = SecretStr(unquote(value.strip()))
    return name, headers


def _sample_ratio(environ: Mapping[str, str]) -> tuple[str, float] | None:
    """The ratio a `traceidratio` sampler's argument gives (1 without one), 0 for `always_off`."""
    sampler = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if sampler in _OFF_SAMPLERS:
        return "OTEL_TRACES_SAMPLER", 0.0
    if sampler not in _RATIO_SAMPLERS:
        return None
    argument = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1"
    try:
        return "OTEL_TRACES_SAMPLER_ARG", float(argument)
    except ValueError:
        raise TelemetryEnvError(f"OTEL_TRACES_SAMPLER_ARG: {argument!r} is not a number") from None


def _capture_content(environ: Mapping[str, str]) -> tuple[str, bool] | None:
    """Content in spans when the GenAI instrumentation's variable says `true` (or 1)."""
    return (_CAPTURE, True) if environ.get(_CAPTURE, "").strip().lower() in ("true", "1") else None


_READERS: dict[str, Callable[[Mapping[str, str]], tuple[str, Any] | None]] = {
    "otlp_endpoint": lambda environ: _first(environ, _ENDPOINTS),
    "headers": _headers,
    "sample_ratio": _sample_ratio,
    "capture_content": _capture_content,
}
"""The `TelemetryConfig` field each reader fills, when the spec leaves it out, with the
variable it read and the value, unvalidated (None: no variable sets it)."""


def telemetry_config(
    given: Mapping[str, Any] | None, environ: Mapping[str, str]
) -> TelemetryConfig | None:
    """The telemetry to send: `given` (the spec block's fields, None when it has none)
    completed from `environ`; None when neither asks for telemetry or the SDK is disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    fields = {k: v for k, v in (given or {}).items() if v is not None}
    if "otlp_endpoint" not in fields and _first(environ, _ENDPOINTS) is None:
        if given is None:
            return None
        raise TelemetryEnvError("no otlp_endpoint: give one, or set OTEL_EXPORTER_OTLP_ENDPOINT")
    read = {}
    for field, reader in _READERS.items():
        if field not in fields and (found := reader(environ)) is not None:
            read[field] = found
    try:
        return TelemetryConfig.model_validate(fields | {f: value for f, (_, value) in read.items()})
    except ValidationError as exc:  # the spec's fields are valid: a variable's value is not
        error = exc.errors()[0]
        field = str(error["loc"][0])
        variable = read[field][0]  # named, never its value (a URL or header may hold a secret)
        if field == "otlp_endpoint":
            raise TelemetryEnvError(f"{variable} is not an http(s):// URL") from None
        raise TelemetryEnvError(f"{variable}: {error['msg'].lower()}") from None
