"""Context caching end to end: one lean mini-cluster job, the real Gemini adapter, and the
loopback stub's cachedContents double evicting the cache twice partway through.

One key, so its runs go one after another and every eviction is met by exactly one
request; the stub evicts every cache just before the 3rd and the 6th request that
references one. The token figures printed are the ones docs/gemini-extras.md quotes
(the double counts one token per 4 bytes of request JSON).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment
from scripted_job import stub_gemini

from streamagents.connectors.loopback_stub import (
    CachedContentsDouble,
    LoopbackStubServer,
    RecordedRequest,
    StubReply,
)
from streamagents.operators.agent import AgentConfig
from streamagents.operators.agent.config import ContextCacheConfig
from streamagents.operators.flink import agent_stream, configure_environment

pytestmark = pytest.mark.e2e

INPUTS = 16
EVICT_AT = (3, 6)
"""Counts of cache-referencing requests before which the stub evicts every cache."""
POLICY = "Refunds are granted within 30 days of purchase with a receipt. " * 400
"""A long system prompt (about 25 KB): what the cache is for."""


class EvictingStub:
    """TEST DOUBLE: answers every question with its own text, through a cachedContents
    double that it empties before the EVICT_AT-th cache-referencing requests."""

    def __init__(self) -> None:
        self.double = CachedContentsDouble(self._answer)
        self._lock = threading.Lock()
        self.referencing = 0
        self.evictions = 0

    @staticmethod
    def _answer(request: RecordedRequest) -> dict[str, Any]:
        question = request.json["contents"][-1]["parts"][0]["text"]
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": f"answer to {question}"}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"candidatesTokenCount": 5},
        }

    def __call__(self, request: RecordedRequest) -> StubReply:
        body = request.json if request.path.endswith(":generateContent") else None
        if body and body.get("cachedContent"):
            with self._lock:
                self.referencing += 1
                if self.referencing in EVICT_AT:
                    self.evictions += 1
                    self.double.evict()
        return self.double(request)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Run the job once; yield its outputs and events and the stub's record."""
    root = tmp_path_factory.mktemp("cache-e2e")
    responder = EvictingStub()
    with LoopbackStubServer(responder) as stub:
        env = StreamExecutionEnvironment.get_execution_environment(
            configure_environment(Configuration())
        )
        env.set_parallelism(1)
        config = AgentConfig(
            job_id="cache-e2e",
            model=stub_gemini(stub.url),
            system_prompt=POLICY,
            documents=["https://example.org/manual.pdf"],
            context_cache=ContextCacheConfig(enabled=True, ttl_s=600),
            memory={"max_messages": 0},
            media_store=str(root / "media"),
        )
        lines = [json.dumps({"id": f"q{i}", "key": "k", "text": f"q{i}"}) for i in range(INPUTS)]
        records = env.from_collection(lines, type_info=Types.STRING())
        streams = agent_stream(records, config)
        tagged = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
            streams.events.map(lambda s: ("event", s), Types.PICKLED_BYTE_ARRAY())
        )
        with tagged.execute_and_collect("cache-e2e") as results:
            emitted = list(results)
        requests = list(stub.requests)
    return {
        "outputs": [json.loads(t) for kind, t in emitted if kind == "output"],
        "events": [json.loads(t) for kind, t in emitted if kind == "event"],
        "requests": requests,
        "stub": responder,
    }


def generate_bodies(job: Any) -> list[dict[str, Any]]:
    return [r.json for r in job["requests"] if r.path.endswith(":generateContent")]


def test_every_input_is_answered_despite_the_evictions(job: Any) -> None:
    outputs = sorted(job["outputs"], key=lambda o: int(o["id"][1:]))
    assert [o["id"] for o in outputs] == [f"q{i}" for i in range(INPUTS)]
    assert all(o["status"] == "ok" and o["text"] == f"answer to {o['id']}" for o in outputs)
    assert job["stub"].evictions == len(EVICT_AT)


def test_each_eviction_gets_exactly_one_uncached_retry_of_the_same_turn(job: Any) -> None:
    bodies = generate_bodies(job)
    assert job["stub"].double.not_found == len(EVICT_AT)
    assert len(bodies) == INPUTS + len(EVICT_AT)
    evicted = [
        e["payload"]["attributes"]["cache"]
        for e in job["events"]
        if e["event_type"] == "context_cache" and e["payload"]["attributes"]["action"] == "evicted"
    ]
    assert len(evicted) == len(EVICT_AT)
    for name in evicted:
        # One key: its runs are sequential, so the last request naming the cache met the 404.
        failed = max(i for i, b in enumerate(bodies) if b.get("cachedContent") == name)
        retry = bodies[failed + 1]
        assert "cachedContent" not in retry and "systemInstruction" in retry
        assert retry["contents"][-1] == bodies[failed]["contents"][-1]


def test_caches_created_are_evictions_plus_one_and_the_last_is_used(job: Any) -> None:
    double = job["stub"].double
    actions = [
        (e["payload"]["attributes"]["action"], e["payload"]["attributes"].get("cache"))
        for e in job["events"]
        if e["event_type"] == "context_cache"
    ]
    calls = [(r.method, r.path.split("/")[-1][:40]) for r in job["requests"]]
    assert len(double.created) == len(EVICT_AT) + 1, (actions, calls)
    created = [
        e
        for e in job["events"]
        if e["event_type"] == "context_cache" and e["payload"]["attributes"]["action"] == "created"
    ]
    assert [e["payload"]["attributes"]["cache"] for e in created] == double.created
    assert generate_bodies(job)[-1].get("cachedContent") == double.created[-1]


def test_cached_requests_omit_what_the_cache_holds_and_tokens_are_counted(job: Any) -> None:
    bodies = generate_bodies(job)
    cached = [b for b in bodies if b.get("cachedContent")]
    uncached = [b for b in bodies if not b.get("cachedContent")]
    for body in cached:
        assert "systemInstruction" not in body and len(body["contents"]) == 1
    for body in uncached:
        assert "Refunds are granted" in json.dumps(body["systemInstruction"])
        assert "manual.pdf" in json.dumps(body["contents"][0])
    responses = [e for e in job["events"] if e["event_type"] == "chat_response"]
    cached_usage = [
        e["payload"]["usage"] for e in responses if e["payload"]["usage"]["cached_tokens"]
    ]
    served = len(cached) - len(EVICT_AT)  # the evicted ones were answered by their retry
    assert len(cached_usage) == served
    total_cached = sum(o["usage"]["cached_tokens"] for o in job["outputs"])
    assert total_cached == sum(u["cached_tokens"] for u in cached_usage) > 0
    uncached_in = [
        e["payload"]["usage"]["input_tokens"]
        for e in responses
        if not e["payload"]["usage"]["cached_tokens"]
    ]
    cache_tokens = cached_usage[0]["cached_tokens"]
    per_turn_sent_cached = cached_usage[0]["input_tokens"] - cache_tokens
    print(
        f"\ncontext cache e2e: {INPUTS} inputs, {len(EVICT_AT)} evictions, "
        f"{len(job['stub'].double.created)} caches; uncached turn input {uncached_in[0]} tokens; "
        f"cached turn input {cached_usage[0]['input_tokens']} tokens of which {cache_tokens} "
        f"from the cache ({per_turn_sent_cached} sent); turns served from the cache "
        f"{served}/{INPUTS}; cached input tokens in all {total_cached}"
    )
