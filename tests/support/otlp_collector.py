"""Reading what OTLP/HTTP exporters posted to the loopback stub (our collector test double).

The stub records each request's protobuf body; these helpers decode them with
opentelemetry-proto into spans, their attributes, and metric data points.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest


def value_of(any_value: Any) -> Any:
    """The Python value of an OTLP `AnyValue` (arrays as tuples)."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value_of(v) for v in any_value.array_value.values)
    return getattr(any_value, kind)


def attributes(item: Any) -> dict[str, Any]:
    """The attributes of a span, resource or data point as a dict."""
    return {a.key: value_of(a.value) for a in item.attributes}


def _protobuf(request: RecordedRequest) -> bytes:
    content_type = {k.lower(): v for k, v in request.headers.items()}["content-type"]
    assert content_type == "application/x-protobuf"
    return request.body


def received_spans(
    stub: LoopbackStubServer, job_id: str = "sample-job", path: str = "/v1/traces"
) -> list[Span]:
    """Every span posted to `path`; each resource must name the service and `job_id`."""
    spans = []
    for request in stub.requests:
        if request.path != path:
            continue
        message = ExportTraceServiceRequest.FromString(_protobuf(request))
        for resource in message.resource_spans:
            resource_attrs = attributes(resource.resource)
            assert resource_attrs["service.name"] == "streamagents"
            assert resource_attrs["streamagents.job_id"] == job_id
            for scope in resource.scope_spans:
                spans.extend(scope.spans)
    return spans


def received_metrics(stub: LoopbackStubServer, path: str = "/v1/metrics") -> list[Metric]:
    """Every metric posted to `path`."""
    metrics = []
    for request in stub.requests:
        if request.path == path:
            message = ExportMetricsServiceRequest.FromString(_protobuf(request))
            for resource in message.resource_metrics:
                for scope in resource.scope_metrics:
                    metrics.extend(scope.metrics)
    return metrics
