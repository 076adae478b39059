"""Failover through the real SDKs against loopback stubs: which model answers, when a call
moves on, the breakers, and a conversation carried between providers (the JSON each SDK
sent, provider-specific data only for the model that made it)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import BadRequest, RetryPolicy, create_model
from streamagents.connectors.providers.circuit_breaker import BreakerSettings
from streamagents.connectors.providers.failover import (
    FailoverLink,
    FailoverModel,
    ModelsUnavailable,
)
from streamagents.connectors.providers.provider_data import MADE_BY, MESSAGE_KEYS, PART_KEYS
from streamagents.serde.chat import AnsweredBy
from streamagents.serde.messages import AudioPart, ChatMessage, ImagePart, TextPart
from tests.support.outage import GEMINI_503, gemini_text, openai_chat_text, responses_text
from tests.support.provider_wire import PNG, WAV, snake, wire_bytes

API_KEY = "sk-failover-test-key-0123456789abcdef"
FAST = {"max_retries": 1, "retry": RetryPolicy(initial_delay_s=0.001, max_delay_s=0.002)}
SIGNATURE = b"gemini-3-pro-own-signature"
HELLO = [ChatMessage.user("hello")]
_PREFIX = {"gemini": "", "gemini-interactions": "", "openai": "/v1", "openai-responses": "/v1"}


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stubs() -> Iterator[list[LoopbackStubServer]]:
    """Three loopback stubs, one per model of a chain."""
    servers = [LoopbackStubServer().start() for _ in range(3)]
    yield servers
    for server in servers:
        server.stop()


def link(provider: str, model: str, stub: LoopbackStubServer) -> FailoverLink:
    """A model of a chain, built by `create_model` against `stub`."""
    built = create_model(
        provider, model, api_key=API_KEY, base_url=stub.url + _PREFIX[provider], **FAST
    )
    return FailoverLink(provider, model, built)


def chain(*links: FailoverLink, clock: FakeClock | None = None, **breaker: Any) -> FailoverModel:
    settings = BreakerSettings(**breaker) if breaker else None
    return FailoverModel(links, breaker=settings, clock=clock or FakeClock())


def ask(model: FailoverModel, messages: list[ChatMessage], **options: Any) -> Any:
    return model.chat(messages, **options)


def gemini_503() -> StubReply:
    return StubReply(GEMINI_503, status=503)


def test_a_503_from_the_primary_is_answered_by_the_fallback(
    stubs: list[LoopbackStubServer],
) -> None:
    primary, fallback, _ = stubs
    primary.script(gemini_503(), gemini_503())
    fallback.script(openai_chat_text("from openai"))
    model = chain(link("gemini", "gemini-3-pro", primary), link("openai", "gpt-fb", fallback))
    response = ask(model, HELLO)
    assert response.message.content == "from openai"
    assert response.answered_by == AnsweredBy(provider="openai", model="gpt-fb", fallback=True)
    assert response.passed_over == ["gemini/gemini-3-pro"]
    assert response.message.metadata[MADE_BY] == "openai/gpt-fb"
    assert len(primary.requests) == 2  # the primary's own retry came first
    sent = fallback.requests[0].json
    assert sent["model"] == "gpt-fb"
    assert sent["messages"] == [{"role": "user", "content": "hello"}]


def test_the_primary_answering_is_no_fallback(stubs: list[LoopbackStubServer]) -> None:
    primary, fallback, _ = stubs
    primary.script(gemini_text("from gemini"))
    model = chain(link("gemini", "gemini-3-pro", primary), link("openai", "gpt-fb", fallback))
    response = ask(model, HELLO)
    assert response.answered_by == AnsweredBy(provider="gemini", model="gemini-3-pro")
    assert response.passed_over == []
    assert fallback.requests == []


def test_a_bad_request_is_the_calls_outcome_not_a_failover(
    stubs: list[LoopbackStubServer],
) -> None:
    primary, fallback, _ = stubs
    bad = {"error": {"code": 400, "message": "bad field", "status": "INVALID_ARGUMENT"}}
    primary.script(StubReply(bad, status=400))
    model = chain(
        link("gemini", "gemini-3-pro", primary),
        link("openai", "gpt-fb", fallback),
        failure_threshold=1,
    )
    with pytest.raises(BadRequest, match="bad field"):
        ask(model, HELLO)
    assert fallback.requests == []
    assert model.breakers["gemini/gemini-3-pro"].state == "closed"


def test_an_open_breaker_skips_its_model_at_once_and_a_probe_closes_it(
    stubs: list[LoopbackStubServer],
) -> None:
    primary, fallback, _ = stubs
    clock = FakeClock()
    model = chain(
        link("gemini", "gemini-3-pro", primary),
        link("openai", "gpt-fb", fallback),
        clock=clock,
        failure_threshold=1,
        cooldown_s=30,
    )
    primary.script(gemini_503(), gemini_503())
    fallback.script(openai_chat_text("one"), openai_chat_text("two"))
    ask(model, HELLO)
    breaker = model.breakers["gemini/gemini-3-pro"]
    assert breaker.state == "open"
    assert ask(model, HELLO).message.content == "two"
    assert len(primary.requests) == 2  # the open breaker sent nothing more
    clock.now = 30.0
    primary.script(gemini_text("back"))
    response = ask(model, HELLO)
    assert response.answered_by == AnsweredBy(provider="gemini", model="gemini-3-pro")
    assert breaker.state == "closed"
    assert breaker.changes == {"open": 1, "half_open": 1, "closed": 1}


def test_no_model_answering_fails_naming_each_without_the_key(
    stubs: list[LoopbackStubServer],
) -> None:
    primary, fallback, _ = stubs
    primary.script(gemini_503(), gemini_503())
    error = {"error": {"message": f"down, key {API_KEY}", "type": "server_error"}}
    fallback.script(StubReply(error, status=502), StubReply(error, status=502))
    model = chain(link("gemini", "gemini-3-pro", primary), link("openai", "gpt-fb", fallback))
    with pytest.raises(ModelsUnavailable) as caught:
        ask(model, HELLO)
    text = str(caught.value)
    assert "gemini/gemini-3-pro: ServerError" in text and "openai/gpt-fb: ServerError" in text
    assert API_KEY not in text
    assert caught.value.attempts == 4


def test_a_fallback_that_cannot_carry_the_media_is_passed_over(
    stubs: list[LoopbackStubServer],
) -> None:
    primary, responses, chat_api = stubs
    primary.script(gemini_503(), gemini_503())
    chat_api.script(openai_chat_text("heard it"))
    model = chain(
        link("gemini", "gemini-3-pro", primary),
        link("openai-responses", "gpt-resp", responses),
        link("openai", "gpt-chat", chat_api),
    )
    audio = [
        ChatMessage.user(
            [TextPart(text="what is said?"), AudioPart(mime_type="audio/wav", data=WAV)]
        )
    ]
    response = ask(model, audio)
    assert response.answered_by == AnsweredBy(provider="openai", model="gpt-chat", fallback=True)
    assert response.passed_over == ["gemini/gemini-3-pro", "openai-responses/gpt-resp"]
    assert responses.requests == []  # refused before anything was sent
    assert model.breakers["openai-responses/gpt-resp"].state == "closed"
    parts = chat_api.requests[0].json["messages"][0]["content"]
    assert parts[1]["input_audio"]["data"] == base64.b64encode(WAV).decode()


def _gemini_call(call_id: str) -> dict[str, Any]:
    call = {"functionCall": {"id": call_id, "name": "lookup", "args": {"q": "x"}}}
    call["thoughtSignature"] = base64.b64encode(SIGNATURE).decode()
    return {"candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}]}


def _openai_call(call_id: str) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"q": "y"}'},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"choices": [{"message": message, "finish_reason": "tool_calls"}]}


def test_a_gemini_history_continues_on_openai_and_back_with_signatures_for_their_maker(
    stubs: list[LoopbackStubServer],
) -> None:
    gemini, openai, _ = stubs
    model = chain(link("gemini", "gemini-3-pro", gemini), link("openai", "gpt-fb", openai))
    history = [
        ChatMessage.user(
            [TextPart(text="what is on it?"), ImagePart(mime_type="image/png", data=PNG)]
        )
    ]

    async def conversation() -> None:
        gemini.script(_gemini_call("c1"))
        first = await model.achat(history)
        history.extend([first.message, ChatMessage.tool_result("c1", "lookup", "a receipt")])
        gemini.script(gemini_503(), gemini_503())
        openai.script(_openai_call("c2"))
        second = await model.achat(history)
        assert second.answered_by is not None and second.answered_by.fallback
        history.extend([second.message, ChatMessage.tool_result("c2", "lookup", "paid")])
        gemini.script(gemini_text("a paid receipt"))
        third = await model.achat(history)
        assert third.answered_by == AnsweredBy(provider="gemini", model="gemini-3-pro")
        await model.aclose()

    asyncio.run(conversation())
    # On OpenAI: the image, Gemini's call and its result, in OpenAI's form, and no signature.
    sent = openai.requests[0].json
    assert sent["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png;")
    assert sent["messages"][1]["tool_calls"][0]["id"] == "c1"
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "a receipt"}
    assert base64.b64encode(SIGNATURE).decode() not in openai.requests[0].body.decode()
    # Back on Gemini: its own call keeps its signature; OpenAI's call has the foreign one.
    contents = snake(gemini.requests[-1].json)["contents"]
    assert wire_bytes(contents[0]["parts"][1]["inline_data"]["data"]) == PNG
    own, foreign = contents[1]["parts"][0], contents[3]["parts"][0]
    assert own["function_call"]["id"] == "c1"
    assert wire_bytes(own["thought_signature"]) == SIGNATURE
    assert foreign["function_call"]["id"] == "c2"
    assert foreign["thought_signature"] == "skip_thought_signature_validator"
    # The history itself (the key's memory) still holds what each maker gave.
    assert history[1].tool_calls[0].metadata["thought_signature"] == SIGNATURE
    assert history[1].metadata[MADE_BY] == "gemini/gemini-3-pro"
    assert history[3].metadata[MADE_BY] == "openai/gpt-fb"


def test_another_gemini_model_never_gets_the_primarys_signatures(
    stubs: list[LoopbackStubServer],
) -> None:
    pro, flash, _ = stubs
    model = chain(link("gemini", "gemini-3-pro", pro), link("gemini", "gemini-3-flash", flash))
    pro.script(_gemini_call("c1"))
    first = ask(model, HELLO)
    history = [*HELLO, first.message, ChatMessage.tool_result("c1", "lookup", "found")]
    pro.script(gemini_503(), gemini_503())
    flash.script(gemini_text("done"))
    assert ask(model, history).answered_by.model == "gemini-3-flash"  # type: ignore[union-attr]
    call = snake(flash.requests[0].json)["contents"][1]["parts"][0]
    assert call["thought_signature"] == "skip_thought_signature_validator"


def test_a_stored_interaction_is_continued_only_by_the_model_that_stored_it(
    stubs: list[LoopbackStubServer],
) -> None:
    interactions, responses, _ = stubs
    model = chain(
        link("gemini-interactions", "gemini-3-pro", interactions),
        link("openai-responses", "gpt-fb", responses),
    )
    interactions.script(
        {
            "id": "int-1",
            "status": "completed",
            "steps": [{"type": "model_output", "content": [{"type": "text", "text": "hi"}]}],
        }
    )
    first = ask(model, HELLO)
    history = [*HELLO, first.message, ChatMessage.user("and now?")]
    error = {"error": {"code": 503, "message": "down", "status": "UNAVAILABLE"}}
    interactions.script(StubReply(error, status=503), StubReply(error, status=503))
    responses.script(responses_text("from responses"))
    ask(model, history, previous_interaction_id="int-1")
    assert interactions.requests[-1].json["previous_interaction_id"] == "int-1"
    sent = responses.requests[0].json
    assert "previous_interaction_id" not in sent
    assert [item["content"] for item in sent["input"]] == ["hello", "hi", "and now?"]


def test_each_model_is_sent_its_own_generation_options(stubs: list[LoopbackStubServer]) -> None:
    primary, fallback, _ = stubs
    primary.script(gemini_503(), gemini_503())
    fallback.script(openai_chat_text("short"))
    first = link("gemini", "gemini-3-pro", primary)
    second = link("openai", "gpt-fb", fallback)
    second.generation = {"max_tokens": 50}
    ask(chain(first, second), HELLO, temperature=0.1)
    assert snake(primary.requests[0].json)["generation_config"] == {"temperature": 0.1}
    sent = fallback.requests[0].json
    assert sent["max_completion_tokens"] == 50 and "temperature" not in sent


def test_the_provider_data_keys_are_the_wires_own() -> None:
    from streamagents.connectors.providers.gemini import interactions_wire, wire
    from streamagents.connectors.providers.openai import responses_wire

    assert set(PART_KEYS) == {wire.THOUGHT_SIGNATURE, responses_wire.ITEM_ID}
    assert set(MESSAGE_KEYS) == {interactions_wire.THOUGHTS, interactions_wire.INTERACTION_ID}
