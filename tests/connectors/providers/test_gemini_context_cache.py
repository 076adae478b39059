"""Gemini explicit context caching through the real SDK against the loopback stub's
cachedContents double: creation off the turn path, requests referencing the cache and
omitting what it holds, eviction recovery, refusal, token accounting, pickling."""

from __future__ import annotations

import asyncio
import pickle
import threading
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import (
    CachedContentsDouble,
    LoopbackStubServer,
    RecordedRequest,
    StubReply,
)
from streamagents.connectors.providers import (
    BadRequest,
    GeminiChatModel,
    PrefixCache,
    create_model,
)
from streamagents.connectors.providers.errors import error_for_status
from streamagents.connectors.providers.gemini import ContextCacheSettings
from streamagents.connectors.providers.gemini._context_cache import is_cache_gone
from streamagents.connectors.providers.gemini.wire import to_request
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import AGENT_DOCUMENTS, ChatMessage, DocumentPart

OK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ]
}
SYSTEM = ChatMessage.system("You answer questions about the manual. " * 50)
DOCUMENTS = ChatMessage(
    role="user",
    parts=[DocumentPart(mime_type="application/pdf", url="https://example.org/manual.pdf")],
    metadata={AGENT_DOCUMENTS: True},
)
LOOKUP = ToolSpec(name="lookup", description="Looks an order up.")


def ok(_request: RecordedRequest) -> dict[str, Any]:
    return OK


def model(stub: LoopbackStubServer, **settings: Any) -> GeminiChatModel:
    created = create_model(
        "gemini",
        "gemini-3-flash",
        api_key="k",
        base_url=stub.url,
        max_retries=0,
        context_cache=ContextCacheSettings(**settings),
    )
    assert isinstance(created, GeminiChatModel)
    return created


def ask(question: str) -> list[ChatMessage]:
    return [SYSTEM, DOCUMENTS, ChatMessage.user(question)]


def generate_bodies(stub: LoopbackStubServer) -> list[dict[str, Any]]:
    return [r.json for r in stub.requests if r.path.endswith(":generateContent")]


async def settle(model: GeminiChatModel) -> None:
    """Let the background creation finish (the turns themselves never wait for it)."""
    for _ in range(200):
        cache = model.context_cache
        assert cache is not None
        if cache._creating is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the cache was never created")


def test_first_turn_is_uncached_and_creates_the_cache_then_turns_reference_it() -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub)

        async def scenario() -> list[Any]:
            first = await gemini.achat(ask("q1"), [LOOKUP])
            await settle(gemini)
            second = await gemini.achat(ask("q2"), [LOOKUP])
            return [first, second]

        first, second = asyncio.run(scenario())
    assert double.created == ["cachedContents/stub-1"]
    create = next(r for r in stub.requests if "cachedContents" in r.path)
    assert create.method == "POST"
    held = create.json
    assert held["model"].endswith("gemini-3-flash")
    assert held["ttl"] == "3600s"
    assert "manual" in str(held["systemInstruction"])
    assert "example.org/manual.pdf" in str(held["contents"][0]["parts"][0]["fileData"])
    assert held["tools"][0]["functionDeclarations"][0]["name"] == "lookup"
    uncached, cached = generate_bodies(stub)
    assert "cachedContent" not in uncached and "systemInstruction" in uncached
    assert len(uncached["contents"]) == 2
    # The cached request names the cache and omits what it holds.
    assert cached["cachedContent"] == "cachedContents/stub-1"
    for held_field in ("systemInstruction", "tools", "toolConfig"):
        assert held_field not in cached
    assert cached["contents"] == [{"role": "user", "parts": [{"text": "q2"}]}]
    assert first.usage.cached_tokens == 0 and first.cached_content is None
    tokens = double.live["cachedContents/stub-1"]["usageMetadata"]["totalTokenCount"]
    assert second.usage.cached_tokens == tokens > 0
    assert second.usage.input_tokens > tokens
    assert second.cached_content == "cachedContents/stub-1"
    assert [e["action"] for e in second.cache_events] == ["created"]
    assert second.cache_events[0]["tokens"] == str(tokens)


def test_turns_do_not_wait_for_a_slow_creation() -> None:
    release = threading.Event()

    def responder(request: RecordedRequest) -> StubReply | dict[str, Any]:
        if "cachedContents" in request.path:
            release.wait(10)
        return double(request)

    double = CachedContentsDouble(ok)
    with LoopbackStubServer(responder) as stub:
        gemini = model(stub)

        async def scenario() -> None:
            for question in ("q1", "q2", "q3"):
                await gemini.achat(ask(question))
            release.set()
            await settle(gemini)
            await gemini.achat(ask("q4"))

        asyncio.run(scenario())
    bodies = generate_bodies(stub)
    # Three turns answered while creation hung; only the one after it finished is cached.
    assert ["cachedContent" in b for b in bodies] == [False, False, False, True]
    assert len(double.created) == 1


def test_a_creation_finishing_during_an_uncached_turn_is_not_made_again() -> None:
    release, created = threading.Event(), threading.Event()

    def responder(request: RecordedRequest) -> StubReply | dict[str, Any]:
        if "cachedContents" in request.path:
            release.wait(10)
            reply = double(request)
            created.set()
            return reply
        if b"q2" in request.body:  # the creation completes while this turn is out
            release.set()
            created.wait(10)
            threading.Event().wait(0.3)  # time for the client to take the created cache
        return double(request)

    double = CachedContentsDouble(ok)
    with LoopbackStubServer(responder) as stub:
        gemini = model(stub)

        async def scenario() -> None:
            await gemini.achat(ask("q1"))
            await gemini.achat(ask("q2"))
            await settle(gemini)
            await gemini.achat(ask("q3"))

        asyncio.run(scenario())
    assert double.created == ["cachedContents/stub-1"]
    assert ["cachedContent" in b for b in generate_bodies(stub)] == [False, False, True]


def test_eviction_gives_one_uncached_retry_and_a_fresh_cache_next_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub)

        async def scenario() -> list[Any]:
            await gemini.achat(ask("q1"))
            await settle(gemini)
            await gemini.achat(ask("q2"))
            double.evict()
            evicted = await gemini.achat(ask("q3"))
            after = await gemini.achat(ask("q4"))
            await settle(gemini)
            fresh = await gemini.achat(ask("q5"))
            return [evicted, after, fresh]

        with caplog.at_level("INFO"):
            evicted, after, fresh = asyncio.run(scenario())
    names = [b.get("cachedContent") for b in generate_bodies(stub)]
    stub_1, stub_2 = "cachedContents/stub-1", "cachedContents/stub-2"
    # q1 uncached, q2 cached, q3 cached -> 404 -> one uncached retry, q4 uncached (creates
    # the fresh cache), q5 on the fresh cache.
    assert names == [None, stub_1, stub_1, None, None, stub_2]
    assert double.not_found == 1
    assert double.created == [stub_1, stub_2]
    assert evicted.message.content == "ok" and evicted.usage.cached_tokens == 0
    assert [e["action"] for e in evicted.cache_events] == ["evicted"]
    assert evicted.cache_events[0]["cache"] == stub_1
    assert after.cache_events == []
    assert fresh.cached_content == stub_2
    assert "context cache cachedContents/stub-1 is gone" in caplog.text


def test_a_refused_creation_turns_caching_off_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    double = CachedContentsDouble(ok)
    double.refuse_creation = {
        "error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "too small to cache"}
    }
    with LoopbackStubServer(double) as stub:
        gemini = model(stub)

        async def scenario() -> list[Any]:
            replies = []
            for question in ("q1", "q2", "q3"):
                replies.append(await gemini.achat(ask(question)))
                await settle(gemini)
            return replies

        with caplog.at_level("WARNING"):
            replies = asyncio.run(scenario())
    assert all(r.message.content == "ok" for r in replies)
    assert [r for r in stub.requests if "cachedContents" in r.path].__len__() == 1
    assert all("cachedContent" not in b for b in generate_bodies(stub))
    assert [e["action"] for r in replies for e in r.cache_events] == ["off"]
    assert caplog.text.count("context caching turned off") == 1
    assert gemini.context_cache is not None and gemini.context_cache.off_reason


def test_a_refused_cache_reference_falls_back_uncached_and_turns_caching_off() -> None:
    def responder(request: RecordedRequest) -> StubReply | dict[str, Any]:
        body = request.json or {}
        if body.get("cachedContent"):
            error = {"code": 400, "status": "INVALID_ARGUMENT", "message": "no cache here"}
            return StubReply({"error": error}, 400)
        return double(request)

    double = CachedContentsDouble(ok)
    with LoopbackStubServer(responder) as stub:
        gemini = model(stub)

        async def scenario() -> list[Any]:
            first = await gemini.achat(ask("q1"))
            await settle(gemini)
            return [first, await gemini.achat(ask("q2")), await gemini.achat(ask("q3"))]

        replies = asyncio.run(scenario())
    names = [b.get("cachedContent") for b in generate_bodies(stub)]
    assert names == [None, "cachedContents/stub-1", None, None]
    assert [e["action"] for e in replies[1].cache_events] == ["created", "off"]


def test_a_request_bad_in_itself_is_not_blamed_on_the_cache() -> None:
    def responder(request: RecordedRequest) -> StubReply | dict[str, Any]:
        if "bad" in request.body.decode():
            error = {"code": 400, "status": "INVALID_ARGUMENT", "message": "bad question"}
            return StubReply({"error": error}, 400)
        return double(request)

    double = CachedContentsDouble(ok)
    with LoopbackStubServer(responder) as stub:
        gemini = model(stub)

        async def scenario() -> None:
            await gemini.achat(ask("q1"))
            await settle(gemini)
            with pytest.raises(BadRequest, match="bad question"):
                await gemini.achat(ask("bad"))
            await gemini.achat(ask("q3"))

        asyncio.run(scenario())
    assert gemini.context_cache is not None and gemini.context_cache.off_reason is None
    assert generate_bodies(stub)[-1]["cachedContent"] == "cachedContents/stub-1"


@pytest.mark.parametrize(
    "ttl_s,sent", [(3600.0, "3600s"), (0.5, "0.5s"), (604_800.0, "604800s"), (90.125, "90.125s")]
)
def test_the_ttl_is_sent_as_a_duration_string(ttl_s: float, sent: str) -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub, ttl_s=ttl_s)

        async def scenario() -> None:
            await gemini.achat(ask("q1"))
            await settle(gemini)

        asyncio.run(scenario())
    (create,) = [r for r in stub.requests if "cachedContents" in r.path]
    assert create.json["ttl"] == sent


def test_min_tokens_skips_creation_for_a_small_prompt() -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub, min_tokens=1_000_000)

        async def scenario() -> None:
            for question in ("q1", "q2"):
                await gemini.achat(ask(question))
                await settle(gemini)

        asyncio.run(scenario())
    assert double.created == []
    assert all("cachedContent" not in b for b in generate_bodies(stub))


def test_a_cache_smaller_than_min_tokens_is_deleted_and_caching_turned_off() -> None:
    def big_prompt(_request: RecordedRequest) -> dict[str, Any]:
        return {**OK, "usageMetadata": {"promptTokenCount": 1_000_000}}

    double = CachedContentsDouble(big_prompt, count_tokens=False)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub, min_tokens=100_000)

        async def scenario() -> list[Any]:
            first = await gemini.achat(ask("q1"))
            await settle(gemini)
            await asyncio.sleep(0.2)  # the delete runs in the background too
            return [first, await gemini.achat(ask("q2"))]

        replies = asyncio.run(scenario())
    assert double.created == ["cachedContents/stub-1"]
    assert double.live == {}  # deleted: it would cost storage and save little
    assert [r.method for r in stub.requests if "cachedContents" in r.path] == ["POST", "DELETE"]
    assert all("cachedContent" not in b for b in generate_bodies(stub))
    (off,) = replies[1].cache_events
    assert off["action"] == "off" and "fewer than min_tokens=100000" in off["reason"]


def test_a_pickled_model_carries_no_cache_handle() -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub)

        async def scenario() -> None:
            await gemini.achat(ask("q1"))
            await settle(gemini)

        asyncio.run(scenario())
        assert gemini.context_cache is not None and gemini.context_cache.name is not None
        restored = pickle.loads(pickle.dumps(gemini))
    assert restored.context_cache is not None
    assert restored.context_cache.name is None
    assert restored.context_cache.settings == gemini.context_cache.settings


def test_without_anything_to_cache_no_cache_is_made() -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub)

        async def scenario() -> None:
            for question in ("q1", "q2"):
                await gemini.achat([ChatMessage.user(question)])
                await settle(gemini)

        asyncio.run(scenario())
    assert double.created == []


def test_concurrent_turns_meeting_one_eviction_each_retry_once_and_one_cache_follows() -> None:
    double = CachedContentsDouble(ok)
    with LoopbackStubServer(double) as stub:
        gemini = model(stub)

        async def scenario() -> list[Any]:
            await gemini.achat(ask("warm"))
            await settle(gemini)
            double.evict()
            replies = await asyncio.gather(*(gemini.achat(ask(f"c{i}")) for i in range(8)))
            await gemini.achat(ask("after"))
            await settle(gemini)
            replies.append(await gemini.achat(ask("fresh")))
            return replies

        replies = asyncio.run(scenario())
    bodies = generate_bodies(stub)
    assert double.not_found == 8
    # warm, 8 referencing the evicted cache, 8 uncached retries, after, fresh.
    assert len(bodies) == 1 + 8 + 8 + 2
    retried = [b["contents"][-1] for b in bodies if not b.get("cachedContent")]
    for i in range(8):
        assert retried.count({"role": "user", "parts": [{"text": f"c{i}"}]}) == 1
    events = [e["action"] for r in replies for e in r.cache_events]
    assert events.count("evicted") == 1
    assert double.created == ["cachedContents/stub-1", "cachedContents/stub-2"]
    assert replies[-1].cached_content == "cachedContents/stub-2"


def test_the_cache_key_follows_everything_the_cache_holds_and_nothing_else() -> None:
    def key(system: str, data: bytes, question: str, tools: list[ToolSpec]) -> str:
        documents = ChatMessage(
            role="user",
            parts=[DocumentPart(mime_type="application/pdf", data=data)],
            metadata={AGENT_DOCUMENTS: True},
        )
        messages = [ChatMessage.system(system), documents, ChatMessage.user(question)]
        return to_request(messages, tools).cache_key()

    base = key("policy", b"%PDF-1 a", "q1", [LOOKUP])
    assert key("policy", b"%PDF-1 a", "q2", [LOOKUP]) == base  # the turn's own text
    assert key("policy!", b"%PDF-1 a", "q1", [LOOKUP]) != base
    assert key("policy", b"%PDF-1 b", "q1", [LOOKUP]) != base
    assert key("policy", b"%PDF-1 a", "q1", []) != base


@pytest.mark.parametrize(
    "status,code,message,gone",
    [
        (404, "NOT_FOUND", "CachedContent not found", True),
        (403, "PERMISSION_DENIED", "CachedContent not found (or permission denied)", True),
        (400, "INVALID_ARGUMENT", "Cache content 123 is expired.", True),
        (400, "INVALID_ARGUMENT", "cached_content does not exist", True),
        (400, "INVALID_ARGUMENT", "Model does not support cached content", False),
        (403, "PERMISSION_DENIED", "The caller does not have permission", False),
        (400, "INVALID_ARGUMENT", "Request contains an invalid argument.", False),
    ],
)
def test_which_errors_mean_the_cache_is_gone(
    status: int, code: str, message: str, gone: bool
) -> None:
    error = error_for_status(status, message, provider="gemini", code=code)
    assert is_cache_gone(error) is gone


def test_a_prefix_cache_becomes_the_gemini_context_cache_named_for_its_owner() -> None:
    owner = "job-" + "x" * 200
    gemini = create_model(
        "gemini", "m", api_key="k", prefix_cache=PrefixCache(ttl_s=60, min_tokens=5, owner=owner)
    )
    assert isinstance(gemini, GeminiChatModel) and gemini.context_cache is not None
    settings = gemini.context_cache.settings
    assert (settings.ttl_s, settings.min_tokens) == (60, 5)
    assert settings.display_name == f"streamagents {owner}"[:128]
