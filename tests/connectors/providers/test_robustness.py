"""Robustness rules, the same for every provider: retries, faults, empty replies, clean errors.

Each test runs against all four wires through the real SDKs and the loopback stub.
"""

from __future__ import annotations

import asyncio
import base64
import pickle
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import (
    BadRequest,
    ChatModel,
    ConnectionFailed,
    EmptyResponseError,
    InvalidContent,
    MalformedResponse,
    ProviderError,
    RateLimited,
    RequestTimeout,
    RetryPolicy,
    ServerError,
    create_model,
)
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart

API_KEY = "sk-test-5ecret-api-key-0123456789"
FAST = {"max_retries": 3, "retry": RetryPolicy(initial_delay_s=0.01, max_delay_s=0.05)}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2


@dataclass(frozen=True)
class Wire:
    """What one provider's stubbed API looks like."""

    provider: str
    path: str
    ok: dict[str, Any]
    empty: dict[str, Any]
    error: Callable[[int, str], dict[str, Any]]
    api_prefix: str

    def model(self, base_url: str, **options: Any) -> ChatModel:
        settings = {"api_key": API_KEY, **FAST, **options}
        return create_model(
            self.provider, "test-model", base_url=base_url + self.api_prefix, **settings
        )


def _openai_error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": f"e{status}"}}


WIRES = [
    Wire(
        provider="gemini",
        path=":generateContent",
        ok={"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]},
        empty={"candidates": []},
        error=lambda status, message: {
            "error": {"code": status, "message": message, "status": f"S{status}"}
        },
        api_prefix="",
    ),
    Wire(
        provider="gemini-interactions",
        path="/v1beta/interactions",
        ok={
            "id": "int-1",
            "status": "completed",
            "steps": [{"type": "model_output", "content": [{"type": "text", "text": "ok"}]}],
        },
        empty={"steps": []},
        error=lambda status, message: {
            "error": {"code": status, "message": message, "status": f"S{status}"}
        },
        api_prefix="",
    ),
    Wire(
        provider="openai",
        path="/v1/chat/completions",
        ok={
            "choices": [
                {"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ]
        },
        empty={"choices": []},
        error=_openai_error,
        api_prefix="/v1",
    ),
    Wire(
        provider="openai-responses",
        path="/v1/responses",
        ok={
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                }
            ],
        },
        empty={"output": []},
        error=_openai_error,
        api_prefix="/v1",
    ),
]

HELLO = [ChatMessage.user("hello")]


@pytest.fixture(params=WIRES, ids=[w.provider for w in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param


def test_429_is_retried_honouring_retry_after(stub: LoopbackStubServer, wire: Wire) -> None:
    stub.script(
        StubReply(wire.error(429, "slow down"), status=429, headers={"Retry-After": "1"}), wire.ok
    )
    started = time.monotonic()
    response = wire.model(stub.url).chat(HELLO)
    waited = time.monotonic() - started
    assert response.message.content == "ok"
    assert len(stub.requests) == 2
    assert all(wire.path in r.path for r in stub.requests)
    # The backoff alone would be at most 0.01 s: only Retry-After explains a 1 s wait.
    assert waited >= 1.0


def test_429_keeps_status_and_retry_after_when_retries_run_out(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    stub.script(StubReply(wire.error(429, "quota"), status=429, headers={"Retry-After": "7"}))
    with pytest.raises(RateLimited) as raised:
        wire.model(stub.url, max_retries=0).chat(HELLO)
    assert raised.value.status == 429
    assert raised.value.retry_after == 7.0
    assert "quota" in str(raised.value)
    assert len(stub.requests) == 1


def test_5xx_is_retried_with_backoff(stub: LoopbackStubServer, wire: Wire) -> None:
    stub.script(
        StubReply(wire.error(500, "boom"), status=500),
        StubReply(wire.error(503, "busy"), status=503),
        wire.ok,
    )
    assert wire.model(stub.url).chat(HELLO).message.content == "ok"
    assert len(stub.requests) == 3


def test_each_retried_attempt_is_told_on_the_reply_or_the_final_error(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    before = time.time() * 1000
    stub.script(
        StubReply(wire.error(429, "slow down"), status=429),
        StubReply(wire.error(503, "busy"), status=503),
        wire.ok,
    )
    response = wire.model(stub.url).chat(HELLO)
    after = time.time() * 1000
    facts = [(r.attempt, r.error_type, r.status) for r in response.retries]
    assert facts == [(1, "RateLimited", 429), (2, "ServerError", 503)]
    first, second = response.retries
    assert before <= first.ended_ms <= second.ended_ms <= after
    assert second.ended_ms - first.ended_ms >= first.backoff_ms - 1  # it waited its backoff
    assert all(5 <= r.backoff_ms <= 50 for r in response.retries)  # FAST's jittered band
    assert "slow down" not in response.model_dump_json()  # facts only, never bodies

    stub.script(StubReply(wire.error(429, "no"), status=429), wire.ok)
    assert wire.model(stub.url).chat(HELLO).retries[0].status == 429
    stub.script(wire.ok)
    assert wire.model(stub.url).chat(HELLO).retries == []

    stub.script(*[StubReply(wire.error(500, f"boom {i}"), status=500) for i in range(3)])
    with pytest.raises(ServerError) as raised:
        wire.model(stub.url, max_retries=2).chat(HELLO)
    assert [(r.attempt, r.status) for r in raised.value.retries] == [(1, 500), (2, 500)]
    assert raised.value.attempts == 3


def test_slow_reply_times_out_and_is_retried(stub: LoopbackStubServer, wire: Wire) -> None:
    stub.script(StubReply(wire.ok, delay_s=1.5), wire.ok)
    assert wire.model(stub.url, timeout=0.3).chat(HELLO).message.content == "ok"
    assert len(stub.requests) == 2

    stub.script(StubReply(wire.ok, delay_s=1.5))
    with pytest.raises(RequestTimeout) as raised:
        wire.model(stub.url, timeout=0.3, max_retries=0).chat(HELLO)
    assert "0.3 s" in str(raised.value)


@pytest.mark.parametrize("status", [400, 401, 404])
def test_4xx_other_than_429_is_not_retried(
    stub: LoopbackStubServer, wire: Wire, status: int
) -> None:
    stub.script(StubReply(wire.error(status, "the request is wrong"), status=status), wire.ok)
    with pytest.raises(BadRequest) as raised:
        wire.model(stub.url).chat(HELLO)
    assert raised.value.status == status
    assert raised.value.provider == wire.provider
    assert "the request is wrong" in str(raised.value)
    assert len(stub.requests) == 1


def test_retries_stop_at_max_retries_with_the_last_error(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    stub.script(*[StubReply(wire.error(500, f"boom {i}"), status=500) for i in range(5)])
    with pytest.raises(ServerError) as raised:
        wire.model(stub.url, max_retries=2).chat(HELLO)
    assert raised.value.attempts == 3
    assert "boom 2" in str(raised.value)
    assert len(stub.requests) == 3


def test_the_retry_budget_caps_retries_across_calls(stub: LoopbackStubServer, wire: Wire) -> None:
    model = wire.model(stub.url, retry_budget={"ratio": 0.0, "reserve": 1.0})
    stub.script(StubReply(wire.error(500, "boom"), status=500), wire.ok)
    assert model.chat(HELLO).message.content == "ok"
    stub.script(StubReply(wire.error(500, "boom"), status=500), wire.ok)
    with pytest.raises(ServerError) as raised:
        model.chat(HELLO)
    assert raised.value.attempts == 1
    assert len(stub.requests) == 3


def test_silent_empty_reply_raises_empty_response_error_after_one_retry(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    stub.script(wire.empty, wire.empty)
    with pytest.raises(EmptyResponseError) as raised:
        wire.model(stub.url, max_retries=0).chat(HELLO)
    assert raised.value.attempts == 2
    assert len(stub.requests) == 2

    stub.script(wire.empty, wire.ok)
    assert wire.model(stub.url, max_retries=0).chat(HELLO).message.content == "ok"
    assert len(stub.requests) == 4


def test_malformed_json_reply_is_a_malformed_response_and_retried(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    stub.script(StubReply(b'{"candidates": [{"content'), wire.ok)
    assert wire.model(stub.url).chat(HELLO).message.content == "ok"
    assert len(stub.requests) == 2

    stub.script(StubReply(b"<html>bad gateway</html>"), StubReply(b"{not json"))
    with pytest.raises(MalformedResponse) as raised:
        wire.model(stub.url, max_retries=1).chat(HELLO)
    assert isinstance(raised.value, ServerError)
    assert len(stub.requests) == 4


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_refused_connection_is_connection_failed_after_retries(wire: Wire, transport: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as raised:
        wire.model(f"http://127.0.0.1:{port}", max_retries=1, transport=transport).chat(HELLO)
    assert raised.value.attempts == 2
    assert time.monotonic() - started < 1.0  # no retry of the SDK's own under ours


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_dropped_connection_is_connection_failed_and_retried(
    stub: LoopbackStubServer, wire: Wire, transport: str
) -> None:
    stub.script(StubReply(drop=True), wire.ok)
    assert wire.model(stub.url, transport=transport).chat(HELLO).message.content == "ok"
    assert len(stub.requests) == 2

    stub.script(StubReply(drop=True), StubReply(drop=True))
    with pytest.raises(ConnectionFailed) as raised:
        wire.model(stub.url, max_retries=1, transport=transport).chat(HELLO)
    assert raised.value.attempts == 2
    assert len(stub.requests) == 4


def test_an_unknown_transport_is_refused_naming_the_choices(wire: Wire) -> None:
    with pytest.raises(ValueError, match="transport\n  Input should be 'aiohttp' or 'httpx'"):
        wire.model("http://127.0.0.1:9", transport="requests")


def test_errors_never_contain_the_api_key_or_media_bytes(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    encoded = base64.b64encode(PNG).decode()
    urlsafe = base64.urlsafe_b64encode(PNG).decode()
    echo = f"invalid request with key {API_KEY} and image data {encoded} / {urlsafe}"
    stub.script(StubReply(wire.error(400, echo), status=400))
    message = ChatMessage.user([TextPart(text="look"), ImagePart(mime_type="image/png", data=PNG)])
    with pytest.raises(ProviderError) as raised:
        wire.model(stub.url).chat([message])
    error = raised.value
    assert stub.requests[0].body  # the request did carry the key and the bytes
    assert "invalid request with key" in str(error)
    rendered = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    for text in (str(error), repr(error), error.message, rendered):
        assert API_KEY not in text
        assert encoded[:40] not in text
        assert urlsafe[:40] not in text
    assert error.__cause__ is None
    assert error.__context__ is None


def test_malformed_base64_fails_alike_on_every_wire_before_sending(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    bad = {"kind": "document", "mime_type": "application/pdf", "data": "%%% not base64"}
    model = wire.model(stub.url)
    sentences = set()
    for message in (
        {"role": "user", "parts": [bad]},
        {"role": "tool", "tool_call_id": "call_1", "name": "fetch", "parts": [bad]},
    ):
        with pytest.raises(InvalidContent) as raised:
            model.chat([*HELLO, message])
        sentences.add(str(raised.value))
    assert len(sentences) == 1
    assert sentences.pop().startswith("data: malformed base64 (14 characters)")
    assert stub.requests == []


def test_a_closed_model_opens_a_fresh_client_on_next_use(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    model = wire.model(stub.url)

    async def twice() -> list[str]:
        answers = []
        for _ in range(2):
            stub.script(wire.ok)
            answers.append((await model.achat(HELLO)).message.content)
            await model.aclose()
        return answers

    assert asyncio.run(twice()) == ["ok", "ok"]
    assert len(stub.requests) == 2


def test_blocking_chat_closes_the_client_it_opened(stub: LoopbackStubServer, wire: Wire) -> None:
    model = wire.model(stub.url)
    stub.script(wire.ok)
    assert model.chat(HELLO).message.content == "ok"
    assert model._client._client is None  # its connections are released, not left to GC


def test_a_model_survives_pickling_and_still_calls(stub: LoopbackStubServer, wire: Wire) -> None:
    model = wire.model(stub.url)
    stub.script(wire.ok)
    assert model.chat(HELLO).message.content == "ok"
    copy = pickle.loads(pickle.dumps(model))
    stub.script(wire.ok)
    assert copy.chat(HELLO).message.content == "ok"
    assert len(stub.requests) == 2


def test_an_error_code_or_status_echoing_the_key_or_media_is_scrubbed(
    stub: LoopbackStubServer, wire: Wire
) -> None:
    encoded = base64.b64encode(PNG).decode()
    echoed = f"KEY_{API_KEY}_DATA_{encoded}"
    body = wire.error(400, "refused")
    body["error"]["status" if wire.provider.startswith("gemini") else "code"] = echoed
    stub.script(StubReply(body, status=400))
    with pytest.raises(ProviderError) as raised:
        wire.model(stub.url).chat(HELLO)
    error = raised.value
    assert error.code is not None and error.code.startswith("KEY_")
    for text in (error.code, str(error), repr(error)):
        assert API_KEY not in text
        assert encoded[:40] not in text
