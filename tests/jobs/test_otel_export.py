"""`streamagents eventlog export-otlp`: GenAI-convention spans from an event log.

The OTLP/HTTP export goes through the real OpenTelemetry exporter to the loopback stub,
which records the protobuf bodies; they are decoded with opentelemetry-proto.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from otlp_collector import attributes, received_spans
from sample_runs import HOSTILE, SECRET, SampleLog, write_retry_and_approval_log, write_sample_log

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.jobs.cli.main import main
from streamagents.operators.telemetry.spans import span_id_for, spans_from_events, trace_id_for
from streamagents.serde.chat import RetryAttempt
from streamagents.serde.events import AgentEvent, new_event
from streamagents.serde.messages import ChatMessage, ToolCall


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleLog:
    return write_sample_log(tmp_path_factory.mktemp("sample"))


def _received(stub: LoopbackStubServer) -> list[Span]:
    assert all(request.path == "/v1/traces" for request in stub.requests)
    return received_spans(stub)


def _export(sample: SampleLog | Path, *extra: str) -> list[Span]:
    log_dir = sample.log_dir if isinstance(sample, SampleLog) else sample
    with LoopbackStubServer(lambda _request: StubReply(b"", headers={})) as stub:
        assert main(["eventlog", "export-otlp", str(log_dir), "--endpoint", stub.url, *extra]) == 0
        return _received(stub)


def test_spans_follow_the_genai_conventions_with_parent_links(sample: SampleLog) -> None:
    spans = _export(sample)
    by_name: dict[str, list[Span]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == [
        "chat gemini-2.5-flash",
        "execute_tool camera",
        "execute_tool lookup",
        "invoke_agent sample-job",
    ]
    roots = {attributes(s)["streamagents.key"]: s for s in by_name["invoke_agent sample-job"]}
    assert set(roots) == {"alice", "bob"}
    alice, bob = roots["alice"], roots["bob"]
    assert alice.trace_id == trace_id_for("run-alice").to_bytes(16, "big")
    assert alice.span_id == span_id_for("run-alice").to_bytes(8, "big")
    assert alice.parent_span_id == b""
    for span in spans:
        if span is not alice and span is not bob:
            root = alice if span.trace_id == alice.trace_id else bob
            assert span.parent_span_id == root.span_id
            assert root.start_time_unix_nano <= span.start_time_unix_nano
            assert span.end_time_unix_nano <= root.end_time_unix_nano
    alice_attrs = attributes(alice)
    expected = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "sample-job",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.conversation.id": "alice",
        "streamagents.run_id": "run-alice",
        "streamagents.input_id": "in-1",
        "streamagents.status": "ok",
        "gen_ai.usage.input_tokens": 420,
        "gen_ai.usage.output_tokens": 35,
    }
    assert {k: alice_attrs.get(k) for k in expected} == expected
    assert alice.status.code == Status.STATUS_CODE_UNSET
    assert alice.kind == Span.SPAN_KIND_INTERNAL
    bob_attrs = attributes(bob)
    assert bob_attrs["error.type"] == "BudgetExceeded"
    assert bob_attrs["streamagents.budget"] == "max_tool_calls"
    assert bob.status.code == Status.STATUS_CODE_ERROR

    chats = sorted(
        (s for s in by_name["chat gemini-2.5-flash"] if s.trace_id == alice.trace_id),
        key=lambda s: s.start_time_unix_nano,
    )
    assert len(chats) == 2
    first = attributes(chats[0])
    assert first == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.response.model": "gemini-2.5-flash-001",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 15,
        "gen_ai.response.id": "run-alice.0002-interaction",
        "streamagents.cost_usd": 0.0012,
    }
    assert attributes(chats[1])["gen_ai.usage.cache_read.input_tokens"] == 256
    assert chats[0].kind == Span.SPAN_KIND_CLIENT
    assert chats[0].end_time_unix_nano - chats[0].start_time_unix_nano >= 395_000_000
    assert chats[0].span_id == span_id_for("run-alice.0002").to_bytes(8, "big")

    (camera,) = by_name["execute_tool camera"]
    assert attributes(camera) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "camera",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.type": "function",
        "streamagents.tool.is_error": False,
    }
    (lookup,) = by_name["execute_tool lookup"]
    assert attributes(lookup)["error.type"] == "ToolError"
    assert attributes(lookup)["streamagents.tool.is_error"] is True
    assert lookup.status.code == Status.STATUS_CODE_ERROR


def test_same_log_gives_the_same_ids_and_a_replayed_step_counts_once(sample: SampleLog) -> None:
    events = list(read_events(sample.log_dir, typed=True))
    once = spans_from_events(events)
    replayed = spans_from_events([*events, *events[3:7]])  # a restore re-emits some steps
    assert [(s.trace_id, s.span_id, s.parent_span_id, s.name) for s in once] == [
        (s.trace_id, s.span_id, s.parent_span_id, s.name) for s in replayed
    ]
    assert len({s.span_id for s in once}) == len(once)
    assert len({s.trace_id for s in once}) == 2


def test_content_only_when_asked_media_as_uris_never_bytes_or_secrets(sample: SampleLog) -> None:
    plain = _export(sample)
    assert not any(
        key.startswith(
            ("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg", "gen_ai.tool.call.res")
        )
        for span in plain
        for key in attributes(span)
    )
    captured = _export(sample, "--capture-content")
    raw = b"".join(span.SerializeToString() for span in captured)
    stored = [f.read_bytes() for f in sample.media_root.rglob("*") if f.is_file()]
    assert len(stored) == 2
    for data in stored:
        assert data not in raw
        assert base64.b64encode(data) not in raw
    assert SECRET.encode() not in raw
    chat = next(
        s
        for s in captured
        if s.name.startswith("chat") and attributes(s)["gen_ai.usage.input_tokens"] == 300
    )
    inputs = json.loads(attributes(chat)["gen_ai.input.messages"])
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool"]
    image = inputs[0]["parts"][1]
    assert image == {
        "type": "uri",
        "modality": "image",
        "mime_type": "image/png",
        "uri": sample.user_image.uri,
        "size_bytes": sample.user_image.size_bytes,
    }
    assert inputs[1]["parts"] == [
        {"type": "tool_call", "id": "call-1", "name": "camera", "arguments": {"name": "north"}}
    ]
    assert inputs[2]["parts"][0] == {
        "type": "tool_call_response",
        "id": "call-1",
        "response": "picture from north",
    }
    assert inputs[2]["parts"][1]["uri"] == sample.tool_image.uri
    outputs = json.loads(attributes(chat)["gen_ai.output.messages"])
    assert outputs[0]["finish_reason"] == "STOP"
    lookup = next(s for s in captured if s.name == "execute_tool lookup")
    assert json.loads(attributes(lookup)["gen_ai.tool.call.arguments"]) == {"q": HOSTILE}
    assert attributes(lookup)["gen_ai.tool.call.result"] == f"failed: {HOSTILE}"


def test_json_file_holds_the_same_spans_in_otlp_json(
    sample: SampleLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "new" / "spans.json"
    assert main(["eventlog", "export-otlp", str(sample.log_dir), "--json", str(out)]) == 0
    assert "wrote 7 spans of 2 runs" in capsys.readouterr().out
    document = json.loads(out.read_text())
    spans = [
        span
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert len(spans) == 7
    root = next(
        s
        for s in spans
        if s["name"] == "invoke_agent sample-job"
        and "parentSpanId" not in s
        and any(a["value"].get("stringValue") == "alice" for a in s["attributes"])
    )
    assert root["traceId"] == f"{trace_id_for('run-alice'):032x}"
    assert root["spanId"] == f"{span_id_for('run-alice'):016x}"
    children = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
    assert len(children) == 3


def test_retries_are_chat_span_events_and_an_approval_wait_is_a_span(tmp_path: Path) -> None:
    log = tmp_path / "log"
    write_retry_and_approval_log(log)
    spans = {span.name: span for span in _export(log)}
    chat = spans["chat gpt-test"]
    assert attributes(chat)["streamagents.attempts"] == 3
    assert [e.name for e in chat.events] == ["retry", "retry"]
    first, second = (attributes(e) for e in chat.events)
    assert first == {
        "streamagents.retry.attempt": 1,
        "error.type": "RateLimited",
        "http.response.status_code": 429,
        "streamagents.retry.backoff_ms": 400.0,
    }
    assert second["http.response.status_code"] == 503
    assert chat.start_time_unix_nano < chat.events[0].time_unix_nano < chat.end_time_unix_nano
    assert chat.events[0].time_unix_nano < chat.events[1].time_unix_nano

    wait = spans["await_approval refund"]
    assert wait.parent_span_id == spans["invoke_agent sample-job"].span_id
    assert wait.end_time_unix_nano - wait.start_time_unix_nano == 30_000 * 1_000_000
    facts = attributes(wait)
    assert facts["streamagents.approval.decision"] == "approve"
    assert facts["streamagents.approval.timed_out"] is False
    assert "streamagents.approval.by" not in facts
    captured = {span.name: span for span in _export(log, "--capture-content")}
    assert attributes(captured["await_approval refund"])["streamagents.approval.by"] == "ana"
    assert wait.span_id == captured["await_approval refund"].span_id


def test_a_collector_that_refuses_fails_the_command_and_says_so(
    sample: SampleLog, capsys: pytest.CaptureFixture[str]
) -> None:
    with LoopbackStubServer(lambda _request: StubReply(b"no", status=400)) as stub:
        code = main(["eventlog", "export-otlp", str(sample.log_dir), "--endpoint", stub.url])
        assert len(stub.requests) == 1
    assert code == 2
    assert "did not accept the spans" in capsys.readouterr().err


def test_bad_arguments_are_named(sample: SampleLog, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eventlog", "export-otlp", str(sample.log_dir)]) == 2
    assert "--json FILE and/or --endpoint URL" in capsys.readouterr().err
    assert (
        main(
            [
                "eventlog",
                "export-otlp",
                str(sample.log_dir),
                "--endpoint",
                "http://127.0.0.1:9",
                "--header",
                "novalue",
            ]
        )
        == 2
    )
    assert "NAME=VALUE" in capsys.readouterr().err
    assert main(["eventlog", "export-otlp", "/nonexistent/log", "--json", "x.json"]) == 2


def test_without_the_extra_the_command_says_what_to_install(
    sample: SampleLog,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A None entry makes `import` fail as it does when the package is not installed.
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    out = tmp_path / "spans.json"
    assert main(["eventlog", "export-otlp", str(sample.log_dir), "--json", str(out)]) == 2
    assert "pip install 'streamagents[otel]'" in capsys.readouterr().err
    assert not out.exists()


_APPROVALS = ["approval_requested", "approval_decided", "approval_expired"]
_KINDS = ["input", "chat_request", "chat_response", "tool_request", "tool_response", "output"]


@st.composite
def _event_logs(draw: st.DrawFn) -> list[AgentEvent]:
    """Any order and mix of run events: dangling upstreams, missing steps, odd latencies."""
    events: list[AgentEvent] = []
    for index in range(draw(st.integers(1, 25))):
        run = draw(st.sampled_from(["r1", "r2", "r3"]))
        earlier = [e.event_id for e in events] or ["x"]
        upstream = draw(st.one_of(st.none(), st.sampled_from(earlier)))
        kind = draw(st.sampled_from([*_KINDS, *_APPROVALS, "error"]))
        payload: dict[str, Any] = {}
        if kind in ("chat_response", "tool_response"):  # the kinds that time their step
            payload["latency_ms"] = draw(st.one_of(st.none(), st.floats(0, 1e7)))
        if kind in _APPROVALS:
            payload["attributes"] = {"call_id": draw(st.sampled_from(["a", "b"]))}
        if kind == "chat_response":
            when = draw(st.floats(-1e7, 2e7))
            retry = RetryAttempt(attempt=1, ended_ms=when, error_type="E", backoff_ms=1.0)
            payload["retries"] = draw(st.lists(st.just(retry), max_size=2))
        if kind == "tool_request":
            payload["tool_calls"] = [
                ToolCall(id=f"c{n}", name="t", arguments={"a": draw(st.text(max_size=5))})
                for n in range(draw(st.integers(0, 3)))
            ]
        if kind == "tool_response":
            payload["tool_results"] = [
                ChatMessage.tool_result(f"c{n}", "t", draw(st.text(max_size=5)), is_error=True)
                for n in range(draw(st.integers(0, 2)))
            ]
        events.append(
            new_event(
                kind,
                job_id="j",
                key="k",
                run_id=run,
                sequence=draw(st.integers(0, 30)),
                upstream_event_id=upstream,
                timestamp_ms=draw(st.integers(0, 10**7)),
                event_id=f"{run}.{index}",
                **payload,
            )
        )
    return events


@settings(max_examples=200, deadline=None)
@given(_event_logs(), st.booleans())
def test_any_event_mix_gives_well_formed_spans(events: list[AgentEvent], capture: bool) -> None:
    spans = spans_from_events(events, capture_content=capture)
    assert len({s.span_id for s in spans}) == len(spans)
    roots = {s.trace_id: s for s in spans if s.parent_span_id is None}
    assert len(roots) == len({e.run_id for e in events})
    for span in spans:
        assert 0 < span.span_id < 2**64 and 0 < span.trace_id < 2**128
        assert span.start_ns <= span.end_ns
        root = roots[span.trace_id]
        if span is not root:
            assert span.parent_span_id == root.span_id
            assert root.start_ns <= span.start_ns and span.end_ns <= root.end_ns
        assert all(span.start_ns <= e.time_ns <= span.end_ns for e in span.events)
    assert spans_from_events(list(reversed(events)), capture_content=capture) == spans


def test_a_chat_span_names_the_model_of_a_failover_chain_that_answered() -> None:
    def event(kind: str, sequence: int, **payload: Any) -> AgentEvent:
        upstream = None if sequence == 1 else f"r.{sequence - 1}"
        return new_event(
            kind,
            job_id="j",
            key="k",
            run_id="r",
            sequence=sequence,
            upstream_event_id=upstream,
            timestamp_ms=1000 + sequence,
            event_id=f"r.{sequence}",
            **payload,
        )

    events = [
        event("input", 1, input_id="in-1"),
        event("chat_request", 2, model="gemini-3-pro", provider="gemini"),
        event(
            "chat_response",
            3,
            model="gpt-fb",
            latency_ms=1.0,
            answered_provider="openai",
            fallback=True,
            passed_over=["gemini/gemini-3-pro"],
        ),
    ]
    (chat,) = [s for s in spans_from_events(events) if s.name.startswith("chat")]
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.response.model"] == "gpt-fb"
    assert chat.attributes["streamagents.model.provider"] == "openai"
    assert chat.attributes["streamagents.model.fallback"] is True
    assert chat.attributes["streamagents.model.passed_over"] == ("gemini/gemini-3-pro",)
