"""Live OpenTelemetry from the running operator: spans and GenAI metrics, sent off the task thread.

`LiveTelemetry` is what an agent operator subtask holds when telemetry is on. The task
thread hands it each step's events (`events`); it builds spans with `LiveSpans` (the
offline exporter's builder, so ids agree), samples by trace id and puts the spans in a
bounded queue. `SpanShipper`'s own thread takes them off in batches, records the GenAI
client metrics of the model calls among them, and posts them to the OTLP/HTTP collector
with the SDK's exporter. A full queue
or a failed export drops spans and counts them (`dropped`); nothing waits for the collector
but that thread. Needs the optional extra `streamagents[otel]`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from streamagents.operators.agent.config import TelemetryConfig
from streamagents.operators.telemetry.sdk_spans import readable_spans, require_otel, signal_url
from streamagents.operators.telemetry.spans import LiveSpans, SpanRecord
from streamagents.serde.events import AgentEvent, RunEvent
from streamagents.serde.safe_text import redact_secrets

__all__ = ["LiveTelemetry", "SpanShipper", "sampled"]

SCOPE_NAME = "streamagents"
BATCH = 512
"""Most spans per OTLP/HTTP request."""

_TOKEN_BUCKETS = [4.0**n for n in range(14)]  # 1 .. 67M, the conventions' advice
_DURATION_BUCKETS = [0.01 * 2.0**n for n in range(14)]  # 10 ms .. 82 s, likewise

_log = logging.getLogger(__name__)


def sampled(trace_id: int, ratio: float) -> bool:
    """Whether a trace is kept at `ratio`: decided by its id's low 64 bits, so every span of
    a run (and a restored run's later spans) gets the same answer."""
    return (trace_id & 0xFFFF_FFFF_FFFF_FFFF) < ratio * 2**64


def _metrics_url(endpoint: str) -> str:
    if endpoint.rstrip("/").endswith("/v1/traces"):
        return endpoint.rstrip("/")[: -len("traces")] + "metrics"
    return signal_url(endpoint, "metrics")


def _resource(job_id: str) -> Any:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": "streamagents", "streamagents.job_id": job_id})


class SpanShipper:
    """A bounded queue of spans and the thread that exports them in batches.

    `offer` never blocks: past `max_queue_spans` waiting, spans are dropped and counted.
    An export the collector refuses, or that fails to reach it, drops its batch and counts
    it too. `close` gives the thread `timeout_s` to send what waits, then drops the rest."""

    def __init__(
        self,
        config: TelemetryConfig,
        flush_interval_s: float = 1.0,
        observer: Callable[[SpanRecord], None] | None = None,
    ) -> None:
        require_otel()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self._exporter = OTLPSpanExporter(
            endpoint=signal_url(config.otlp_endpoint),
            headers={name: value.get_secret_value() for name, value in config.headers.items()},
            timeout=config.export_timeout_s,
        )
        self._capacity = config.max_queue_spans
        self._interval = flush_interval_s
        self._queue: deque[SpanRecord] = deque()
        self._observer = observer
        self._observed: deque[SpanRecord] = deque(maxlen=config.max_queue_spans)
        self._wake = threading.Condition()
        self._stopping = False
        self.exported = 0
        """Spans the collector accepted."""
        self.dropped = 0
        """Spans lost: the queue was full, or their export failed."""
        self._thread = threading.Thread(target=self._run, name="streamagents-otel", daemon=True)
        self._thread.start()

    def offer(self, spans: Sequence[SpanRecord], observe: Sequence[SpanRecord] = ()) -> None:
        """Queue `spans` for export and `observe` for the observer (on the export thread;
        past `max_queue_spans` waiting, the oldest are not observed). The caller's thread
        never waits for the collector."""
        with self._wake:
            self._observed.extend(observe)
            room = max(0, self._capacity - len(self._queue))
            self._queue.extend(spans[:room])
            self.dropped += max(0, len(spans) - room)
            if len(self._queue) >= BATCH:
                self._wake.notify()

    @property
    def waiting(self) -> int:
        """Spans queued and not yet taken for export."""
        return len(self._queue)

    def _take(self) -> list[SpanRecord] | None:
        """The next batch: a full one, or what came within the flush interval."""
        with self._wake:
            deadline = time.monotonic() + self._interval
            while len(self._queue) < BATCH and not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._wake.wait(remaining)
            if not self._queue:
                return None if self._stopping else []
            return [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]

    def _run(self) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        while True:
            batch = self._take()
            self._observe()
            if batch is None:
                return
            if not batch:
                continue
            try:
                ok = self._exporter.export(readable_spans(batch, SCOPE_NAME))
                ok = ok == SpanExportResult.SUCCESS
            except Exception as error:  # never let the thread die: count and go on
                _log.warning("span export failed: %s", type(error).__name__)
                ok = False
            with self._wake:
                if ok:
                    self.exported += len(batch)
                else:
                    self.dropped += len(batch)

    def _observe(self) -> None:
        with self._wake:
            observed = list(self._observed)
            self._observed.clear()
        if self._observer is None:
            return
        for span in observed:
            try:
                self._observer(span)
            except Exception as error:  # a metric lost, never the export thread
                _log.warning("recording a span's metrics failed: %s", type(error).__name__)

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what waits within `timeout_s`, drop (and count) the rest, stop the thread."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout_s)
        with self._wake:
            self.dropped += len(self._queue)
            self._queue.clear()
        self._exporter.shutdown()


class _GenAiMetrics:
    """The conventions' client histograms, through the SDK's meter, exported periodically."""

    def __init__(self, config: TelemetryConfig, job_id: str, interval_s: float) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        exporter = OTLPMetricExporter(
            endpoint=_metrics_url(config.otlp_endpoint),
            headers={name: value.get_secret_value() for name, value in config.headers.items()},
            timeout=config.export_timeout_s,
        )
        reader = PeriodicExportingMetricReader(
            exporter,
            export_interval_millis=interval_s * 1000,
            export_timeout_millis=config.export_timeout_s * 1000,
        )
        self._provider = MeterProvider(metric_readers=[reader], resource=_resource(job_id))
        meter = self._provider.get_meter(SCOPE_NAME)
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call, by type (input, output).",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Wall time of each model call.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    def record(self, span: SpanRecord) -> None:
        """Record a chat span's duration and tokens."""
        attrs = span.attributes
        common = {
            name: attrs[name]
            for name in (
                "gen_ai.operation.name",
                "gen_ai.provider.name",
                "gen_ai.request.model",
                "gen_ai.response.model",
                "error.type",
            )
            if name in attrs
        }
        self._duration.record((span.end_ns - span.start_ns) / 1e9, common)
        for kind in ("input", "output"):
            count = attrs.get(f"gen_ai.usage.{kind}_tokens")
            if isinstance(count, int):
                self._tokens.record(count, {**common, "gen_ai.token.type": kind})

    def close(self, timeout_s: float) -> None:
        self._provider.shutdown(timeout_millis=timeout_s * 1000)


class LiveTelemetry:
    """Spans and metrics of one operator subtask's runs, from the events its steps emit;
    every text of a span passes `redact` (the job's `Redactor`)."""

    def __init__(
        self,
        config: TelemetryConfig,
        job_id: str,
        flush_interval_s: float = 1.0,
        redact: Callable[[str], str] = redact_secrets,
    ) -> None:
        self._config = config
        self.spans = LiveSpans(config.capture_content, redact=redact)
        """The runs' spans being built; a run restored mid-way is resumed here."""
        self._metrics = _GenAiMetrics(config, job_id, max(flush_interval_s, 1.0) * 5)
        self._shipper = SpanShipper(config, flush_interval_s, self._metrics.record)

    @property
    def exported(self) -> int:
        """Spans the collector accepted so far."""
        return self._shipper.exported

    @property
    def dropped(self) -> int:
        """Spans lost so far: queue full, or the collector unreachable or refusing."""
        return self._shipper.dropped

    def events(
        self, events: Iterable[str | AgentEvent | RunEvent], run_ended: bool = False
    ) -> None:
        """Take one step's events (`RunEvent`s, JSON or models); `run_ended` when the step
        ended its run, whose span then goes out too."""
        models = [_event(e) for e in events]
        spans = self.spans.add(models)
        if run_ended:
            for run_id in dict.fromkeys(e.run_id for e in models if e.run_id is not None):
                spans += self.spans.end(run_id)
        self._send(spans)

    def end(self, run_id: str) -> None:
        """A run ended without a final step (abandoned): send what is known of it."""
        self._send(self.spans.end(run_id))

    def _send(self, spans: list[SpanRecord]) -> None:
        if not spans:
            return
        chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
        ratio = self._config.sample_ratio
        kept = spans if ratio >= 1 else [s for s in spans if sampled(s.trace_id, ratio)]
        if kept or chats:
            self._shipper.offer(kept, chats)

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what waits (within `timeout_s` each for spans and metrics), then stop."""
        self._shipper.close(timeout_s)
        self._metrics.close(timeout_s)


def _event(event: str | AgentEvent | RunEvent) -> AgentEvent:
    if isinstance(event, AgentEvent):
        return event
    if isinstance(event, RunEvent):
        return event.model()
    return AgentEvent.model_validate_json(event)
