"""OpenTelemetry SDK objects from `SpanRecord`s, for the live and the offline export.

Needs the optional extra `streamagents[otel]`; `require_otel` says what to install when it
is missing. Nothing here imports the SDK until it is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from streamagents.operators.telemetry.spans import SpanRecord

__all__ = [
    "INSTALL_HINT",
    "OtelMissingError",
    "readable_spans",
    "require_otel",
    "signal_url",
]

INSTALL_HINT = "pip install 'streamagents[otel]'"


class OtelMissingError(RuntimeError):
    """The OpenTelemetry SDK or its OTLP exporter is not installed."""


def require_otel() -> None:
    """Raise `OtelMissingError` naming the extra to install unless the SDK can be imported."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as error:
        raise OtelMissingError(
            f"OpenTelemetry export needs the SDK and the OTLP exporter ({error.name} is "
            f"missing): {INSTALL_HINT}"
        ) from None


def readable_spans(spans: Sequence[SpanRecord], scope_name: str) -> list[Any]:
    """The SDK's `ReadableSpan` of each record, ready for an exporter."""
    require_otel()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    scope = InstrumentationScope(scope_name)
    resources: dict[str, Resource] = {}
    readable = []
    for span in spans:
        resource = resources.get(span.job_id)
        if resource is None:
            resource = Resource.create(
                {"service.name": "streamagents", "streamagents.job_id": span.job_id}
            )
            resources[span.job_id] = resource

        def context(span_id: int, trace_id: int = span.trace_id) -> SpanContext:
            return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))

        readable.append(
            ReadableSpan(
                name=span.name,
                context=context(span.span_id),
                parent=None if span.parent_span_id is None else context(span.parent_span_id),
                resource=resource,
                attributes=span.attributes,
                kind=SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL,
                status=Status(StatusCode.ERROR, span.error)
                if span.error is not None
                else Status(StatusCode.UNSET),
                start_time=span.start_ns,
                end_time=span.end_ns,
                events=[Event(e.name, e.attributes, e.time_ns) for e in span.events],
                instrumentation_scope=scope,
            )
        )
    return readable


def signal_url(endpoint: str, signal: str = "traces") -> str:
    """The URL of a collector for `signal` (`traces`, `metrics`): `endpoint` as given, or
    `/v1/{signal}` added to a bare host."""
    bare = urlsplit(endpoint).path in ("", "/")
    return endpoint.rstrip("/") + f"/v1/{signal}" if bare else endpoint
