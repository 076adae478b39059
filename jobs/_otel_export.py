"""Send or write `SpanRecord`s as OTLP, through the OpenTelemetry SDK (`streamagents[otel]`).

`export_http` posts the spans to an OTLP/HTTP collector with the SDK's protobuf exporter;
`otlp_json` gives the same request in OTLP/JSON form (hex ids, as the OTLP spec asks) for a
file. Both need the optional extra; `require_otel` says what to install when it is missing.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from streamagents.jobs._otel_spans import SpanRecord

__all__ = ["INSTALL_HINT", "OtelMissingError", "export_http", "otlp_json", "require_otel"]

INSTALL_HINT = "pip install 'streamagents[otel]'"
SCOPE_NAME = "streamagents.eventlog"
BATCH = 512
"""Spans per OTLP/HTTP request."""


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


def _readable_spans(spans: Sequence[SpanRecord]) -> list[Any]:
    require_otel()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    scope = InstrumentationScope(SCOPE_NAME)
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
                instrumentation_scope=scope,
            )
        )
    return readable


def _hex_ids(value: Any) -> Any:
    """The proto3 JSON form with OTLP/JSON's hex trace and span ids in place of base64."""
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_ids(v)
        for k, v in value.items()
    }


def otlp_json(spans: Sequence[SpanRecord]) -> dict[str, Any]:
    """The OTLP/JSON export request (`{"resourceSpans": [...]}`) holding `spans`."""
    from google.protobuf.json_format import MessageToDict

    readable = _readable_spans(spans)
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return _hex_ids(MessageToDict(encode_spans(readable)))


def traces_url(endpoint: str) -> str:
    """The traces URL of a collector: `endpoint` as given, `/v1/traces` added to a bare host."""
    return endpoint.rstrip("/") + "/v1/traces" if urlsplit(endpoint).path in ("", "/") else endpoint


def export_http(
    spans: Sequence[SpanRecord],
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> bool:
    """Post `spans` to the OTLP/HTTP collector at `endpoint`; whether it accepted them."""
    readable = _readable_spans(spans)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = OTLPSpanExporter(
        endpoint=traces_url(endpoint), headers=dict(headers or {}), timeout=timeout_s
    )
    try:
        return all(
            exporter.export(readable[start : start + BATCH]) == SpanExportResult.SUCCESS
            for start in range(0, len(readable), BATCH)
        )
    finally:
        exporter.shutdown()
