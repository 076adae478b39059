"""The telemetry a job sends: its spec's `telemetry` block, completed by the `OTEL_*` variables.

A field the spec leaves out comes from the variables the OpenTelemetry SDKs read
(`OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`,
`OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`);
`OTEL_SDK_DISABLED=true` turns telemetry off. With no block and no endpoint variable the
job sends nothing. Header values are secrets: an error names a variable, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _headers(name: str, text: str) -> dict[str, SecretStr]:
    """`k=v,k2=v2` (values URL-encoded), as the OTLP exporter specification writes them."""
    headers = {}
    for index, item in enumerate(text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TelemetryEnvError(f"{name}: entry {index + 1} is not NAME=VALUE")
        headers[unquote(key.strip())] = SecretStr(unquote(value.strip()))
    return headers


def _sample_ratio(environ: Mapping[str, str]) -> float:
    sampler = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if sampler in _OFF_SAMPLERS:
        return 0.0
    if sampler not in _RATIO_SAMPLERS:
        return 1.0
    argument = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1"
    try:
        ratio = float(argument)
    except ValueError:
        raise TelemetryEnvError(f"OTEL_TRACES_SAMPLER_ARG: {argument!r} is not a number") from None
    if not 0 <= ratio <= 1:
        raise TelemetryEnvError(f"OTEL_TRACES_SAMPLER_ARG: {argument!r} is not within 0..1")
    return ratio


def telemetry_config(
    given: Mapping[str, Any] | None, environ: Mapping[str, str]
) -> TelemetryConfig | None:
    """The telemetry to send: `given` (the spec block's fields, None when it has none)
    completed from `environ`; None when neither asks for telemetry or the SDK is disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    fields = {k: v for k, v in (given or {}).items() if v is not None}
    endpoint = _first(environ, _ENDPOINTS)
    if given is None and endpoint is None:
        return None
    if "otlp_endpoint" not in fields:
        if endpoint is None:
            raise TelemetryEnvError(
                "no otlp_endpoint: give one, or set OTEL_EXPORTER_OTLP_ENDPOINT"
            )
        fields["otlp_endpoint"] = endpoint[1]
    if "headers" not in fields and (headers := _first(environ, _HEADERS)) is not None:
        fields["headers"] = _headers(*headers)
    if "sample_ratio" not in fields:
        fields["sample_ratio"] = _sample_ratio(environ)
    if "capture_content" not in fields:
        fields["capture_content"] = environ.get(_CAPTURE, "").strip().lower() in ("true", "1")
    try:
        return TelemetryConfig.model_validate(fields)
    except ValidationError:  # only a variable's value can be wrong here: name it, not its value
        source = "otlp_endpoint" if endpoint is None else endpoint[0]
        raise TelemetryEnvError(f"{source} is not an http(s):// URL") from None
