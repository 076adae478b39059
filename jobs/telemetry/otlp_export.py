"""Send or write `SpanRecord`s as OTLP, through the OpenTelemetry SDK (`streamagents[otel]`).

`export_http` posts the spans to an OTLP/HTTP collector with the SDK's protobuf exporter;
`otlp_json` gives the same request in OTLP/JSON form (hex ids, as the OTLP spec asks) for a
file. Both need the optional extra (`streamagents.operators.telemetry.sdk_spans.require_otel`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from streamagents.operators.telemetry.sdk_spans import readable_spans, signal_url
from streamagents.operators.telemetry.spans import SpanRecord

__all__ = ["export_http", "otlp_json"]

SCOPE_NAME = "streamagents.eventlog"
BATCH = 512
"""Spans per OTLP/HTTP request."""


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

    readable = readable_spans(spans, SCOPE_NAME)
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return _hex_ids(MessageToDict(encode_spans(readable)))


def export_http(
    spans: Sequence[SpanRecord],
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> bool:
    """Post `spans` to the OTLP/HTTP collector at `endpoint`; whether it accepted them."""
    readable = readable_spans(spans, SCOPE_NAME)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = OTLPSpanExporter(
        endpoint=signal_url(endpoint), headers=dict(headers or {}), timeout=timeout_s
    )
    try:
        return all(
            exporter.export(readable[start : start + BATCH]) == SpanExportResult.SUCCESS
            for start in range(0, len(readable), BATCH)
        )
    finally:
        exporter.shutdown()
