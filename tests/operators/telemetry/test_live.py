"""Live telemetry without Flink: spans built step by step, the bounded exporter, the metrics.

Spans go through the real OpenTelemetry exporter to the loopback stub (the collector test
double), which records the protobuf bodies; `otlp_collector` decodes them.
"""

from __future__ import annotations

import base64
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from otlp_collector import attributes, received_metrics, received_spans
from sample_runs import SECRET, SampleLog, write_sample_log

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.providers import PROVIDER_NAMES
from streamagents.operators.agent import TelemetryConfig
from streamagents.operators.telemetry.live import LiveTelemetry, SpanShipper, sampled
from streamagents.operators.telemetry.spans import (
    _GEN_AI_PROVIDERS,
    LiveSpans,
    SpanRecord,
    _gen_ai_provider,
    spans_from_events,
)
from streamagents.serde.events import AgentEvent, RunEvent

HEADER_SECRET = "Bearer otlp-header-secret-0123456789"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleLog:
    return write_sample_log(tmp_path_factory.mktemp("sample"))


def _by_run(events: list[AgentEvent]) -> dict[str, list[AgentEvent]]:
    runs: dict[str, list[AgentEvent]] = {}
    for event in events:
        runs.setdefault(event.run_id or "", []).append(event)
    return runs


def _live(events: list[AgentEvent], capture: bool = False) -> list[SpanRecord]:
    """The spans LiveSpans gives when each event is its own step, runs ending on their last."""
    live = LiveSpans(capture)
    spans = []
    for run_id, run_events in _by_run(events).items():
        for event in run_events:
            spans += live.add([event])
        spans += live.end(run_id)
    assert live.open_runs == 0
    return spans


def _key(span: SpanRecord) -> tuple[int, int]:
    return span.trace_id, span.span_id


@pytest.mark.parametrize("capture", [False, True])
def test_live_spans_are_the_offline_spans(sample: SampleLog, capture: bool) -> None:
    live = _live(sample.events, capture)
    offline = spans_from_events(sample.events, capture_content=capture)
    assert len(live) == len(offline) == 7
    assert sorted(live, key=_key) == sorted(offline, key=_key)
    # A step's span leaves as soon as its response is in, before its run's span.
    assert live[0].name == "chat gemini-2.5-flash"
    assert live[3].name == "invoke_agent sample-job"


def test_every_provider_has_the_gen_ai_name_of_its_family() -> None:
    names = {provider: _gen_ai_provider(provider) for provider in PROVIDER_NAMES}
    assert set(names.values()) <= set(_GEN_AI_PROVIDERS.values())
    assert names["gemini-interactions"] == "gcp.gemini" and names["openai-responses"] == "openai"
    assert _gen_ai_provider("test-double") == "test-double"


def test_a_run_restored_mid_way_keeps_its_ids(sample: SampleLog) -> None:
    alice = _by_run(sample.events)["run-alice"]
    before = LiveSpans()
    sent = before.add(alice[:6])  # up to the second chat_request, then the job dies
    # The restored run performs its call again: the response comes without its request.
    after = LiveSpans()
    first = alice[0]
    after.resume("run-alice", "sample-job", "alice", first.timestamp_ms, "in-1", (120, 15))
    sent += after.add(alice[6:])
    sent += after.end("run-alice")
    offline = {_key(s): s for s in spans_from_events(alice)}
    assert {_key(s) for s in sent} == set(offline)
    root = next(s for s in sent if s.parent_span_id is None)
    expected = offline[_key(root)]
    assert (root.start_ns, root.end_ns) == (expected.start_ns, expected.end_ns)
    for name in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert root.attributes[name] == expected.attributes[name]
    assert root.attributes["streamagents.input_id"] == "in-1"
    assert root.attributes["streamagents.status"] == "ok"


def _config(url: str, **extra: object) -> TelemetryConfig:
    return TelemetryConfig.model_validate(
        {"otlp_endpoint": url, "headers": {"Authorization": HEADER_SECRET}, **extra}
    )


def _send(
    telemetry: LiveTelemetry,
    events: list[AgentEvent],
    form: Callable[[AgentEvent], str | AgentEvent | RunEvent] | None = None,
) -> None:
    """Each event as its own step, in the form given (the operator hands `RunEvent`s)."""
    form = form or RunEvent.of
    for run_events in _by_run(events).values():
        for event in run_events[:-1]:
            telemetry.events([form(event)])
        telemetry.events([form(run_events[-1])], run_ended=True)


def test_spans_and_metrics_reach_the_collector(sample: SampleLog) -> None:
    with LoopbackStubServer(lambda _request: StubReply(b"", headers={})) as stub:
        telemetry = LiveTelemetry(_config(stub.url, capture_content=True), "sample-job")
        _send(telemetry, sample.events, lambda event: event.model_dump_json())
        telemetry.close()
        assert (telemetry.exported, telemetry.dropped) == (7, 0)
        spans = received_spans(stub)
        metrics = received_metrics(stub)
        for request in stub.requests:
            assert request.headers["authorization"] == HEADER_SECRET
    offline = spans_from_events(sample.events, capture_content=True)
    assert sorted((s.trace_id, s.span_id) for s in spans) == sorted(
        (s.trace_id.to_bytes(16, "big"), s.span_id.to_bytes(8, "big")) for s in offline
    )
    raw = b"".join(span.SerializeToString() for span in spans)
    for data in (f.read_bytes() for f in sample.media_root.rglob("*") if f.is_file()):
        assert data not in raw and base64.b64encode(data) not in raw
    assert SECRET.encode() not in raw
    assert HEADER_SECRET.encode() not in raw
    assert any("gen_ai.input.messages" in attributes(s) for s in spans)

    by_name = {m.name: m for m in metrics}
    assert set(by_name) == {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"}
    duration = by_name["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    assert sum(p.count for p in duration.histogram.data_points) == 3  # three model calls
    tokens = by_name["gen_ai.client.token.usage"].histogram.data_points
    by_type = {attributes(p)["gen_ai.token.type"]: p for p in tokens}
    chats = [s for s in offline if s.name.startswith("chat")]
    for kind in ("input", "output"):
        assert by_type[kind].count == len(chats) == 3
        assert by_type[kind].sum == sum(s.attributes[f"gen_ai.usage.{kind}_tokens"] for s in chats)
    assert attributes(by_type["input"])["gen_ai.provider.name"] == "gcp.gemini"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_collector_costs_dropped_spans_and_no_error(sample: SampleLog) -> None:
    config = _config(f"http://127.0.0.1:{_closed_port()}", export_timeout_s=1)
    telemetry = LiveTelemetry(config, "sample-job", flush_interval_s=0.05)
    _send(telemetry, sample.events)
    telemetry.close(timeout_s=5)
    assert telemetry.exported == 0
    assert telemetry.dropped == 7


def test_a_hanging_collector_never_holds_the_caller_and_the_queue_stays_bounded(
    sample: SampleLog,
) -> None:
    release = threading.Event()

    def hang(_request: RecordedRequest) -> StubReply:
        release.wait(30)
        return StubReply(b"", headers={})

    spans = spans_from_events(sample.events)
    with LoopbackStubServer(hang) as stub:
        shipper = SpanShipper(_config(stub.url, max_queue_spans=5), flush_interval_s=0.01)
        shipper.offer(spans[:1])
        while not stub.requests:  # the one span is out, its export hangs
            threading.Event().wait(0.01)
        for _ in range(10):  # would block for ever if offering waited on the collector
            shipper.offer(spans)
        assert shipper.waiting == 5
        assert shipper.dropped == 10 * 7 - 5
        release.set()
        shipper.close(timeout_s=10)
    assert shipper.exported == 6
    assert shipper.dropped == 65


def test_errors_never_name_the_header_values() -> None:
    with pytest.raises(ValueError) as caught:
        TelemetryConfig.model_validate(
            {"otlp_endpoint": "ftp://x", "headers": {"Authorization": HEADER_SECRET}}
        )
    config = _config("http://127.0.0.1:1")
    assert HEADER_SECRET not in str(caught.value)
    assert HEADER_SECRET not in repr(config) and HEADER_SECRET not in str(config)


@given(st.integers(1, 2**128 - 1), st.floats(0, 1), st.floats(0, 1))
def test_sampling_is_by_trace_id_and_monotonic(trace_id: int, low: float, high: float) -> None:
    low, high = sorted((low, high))
    assert not sampled(trace_id, 0.0)
    assert sampled(trace_id, 1.0)
    assert sampled(trace_id, high) or not sampled(trace_id, low)


def test_sample_ratio_zero_sends_metrics_and_no_spans(sample: SampleLog, tmp_path: Path) -> None:
    with LoopbackStubServer(lambda _request: StubReply(b"", headers={})) as stub:
        telemetry = LiveTelemetry(_config(stub.url, sample_ratio=0.0), "sample-job")
        _send(telemetry, sample.events)
        telemetry.close()
        assert received_spans(stub) == []
        assert {m.name for m in received_metrics(stub)} == {
            "gen_ai.client.token.usage",
            "gen_ai.client.operation.duration",
        }
