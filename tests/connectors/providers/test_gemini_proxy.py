"""The Gemini API over aiohttp goes through the environment's proxy (looked up once per
client, not per call): a proxied endpoint is reached through the proxy, one NO_PROXY names
is reached directly, and the session the model made is closed with it."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import create_model
from streamagents.connectors.providers.gemini._aiohttp_session import shared_tls_context
from streamagents.serde.messages import ChatMessage

OK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ]
}
QUESTION = [ChatMessage.user("hi")]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_calls_go_through_the_proxy_the_environment_names(
    stub: LoopbackStubServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", stub.url)
    model = create_model("gemini", "m", api_key="k", base_url="http://gemini.invalid")
    stub.script(OK)
    assert model.chat(QUESTION).message.content == "ok"
    # A proxy is sent the absolute URL of the endpoint it forwards to.
    assert stub.requests[-1].path == "http://gemini.invalid/v1/models/m:generateContent"


def test_an_endpoint_no_proxy_names_is_reached_directly(
    stub: LoopbackStubServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    no_proxy_env.setenv("NO_PROXY", "127.0.0.1")
    model = create_model("gemini", "m", api_key="k", base_url=stub.url)
    stub.script(OK)
    assert model.chat(QUESTION).message.content == "ok"
    assert stub.requests[-1].path == "/v1/models/m:generateContent"


def test_closing_the_model_closes_the_session_it_sent_with(
    stub: LoopbackStubServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    model = create_model("gemini", "m", api_key="k", base_url=stub.url)

    async def call_then_close() -> object:
        stub.script(OK)
        await model.achat(QUESTION)
        session = model._client.get().aio._api_client._http_options.aiohttp_client
        assert session is not None and not session.closed
        await model.aclose()
        return session

    session = asyncio.run(call_then_close())
    assert session.closed  # type: ignore[attr-defined]


def test_the_clients_of_a_process_share_one_tls_context(
    stub: LoopbackStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client per subtask (several at once when a TaskManager restarts a job) does not
    load the CA bundle for its aiohttp requests and websockets again: one context is built
    for the process (google-genai still builds one for its httpx client)."""
    built: list[ssl.SSLContext] = []
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(create(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    shared_tls_context.cache_clear()
    models = [create_model("gemini", "m", api_key="k", base_url=stub.url) for _ in range(3)]
    for model in models:
        stub.script(OK)
        assert model.chat(QUESTION).message.content == "ok"
    assert len(built) <= 1 + len(models)  # three per client without the shared one
