"""A provider outage on the engine (in-memory port, real SDK models against loopback stubs):
the primary returns 503 for a stretch, every input is answered by the fallback, the
breaker closes again once the primary is back, and nothing is lost or duplicated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine_harness import OPEN, EngineHarness

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import RetryPolicy, create_model
from streamagents.connectors.providers.circuit_breaker import BreakerSettings
from streamagents.connectors.providers.failover import FailoverLink, FailoverModel
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, FallbackModel, ModelSpec
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.operators.engine.metrics import model_metric
from tests.support.outage import OutageDouble, gemini_text, openai_chat_text
from tests.support.provider_wire import snake

FAST = {"max_retries": 1, "retry": RetryPolicy(initial_delay_s=0.001, max_delay_s=0.002)}
PRIMARY, FALLBACK = "gemini/gemini-3-pro", "openai/gpt-fb"


def _last_gemini_text(request: RecordedRequest) -> str:
    return snake(request.json)["contents"][-1]["parts"][0]["text"]


def _last_openai_text(request: RecordedRequest) -> str:
    return request.json["messages"][-1]["content"]


def test_an_outage_of_the_primary_is_answered_by_the_fallback_and_the_breaker_closes_after(
    tmp_path: Path,
) -> None:
    primary = OutageDouble(lambda r: gemini_text(f"gemini: {_last_gemini_text(r)}"))
    fallback = OutageDouble(lambda r: openai_chat_text(f"openai: {_last_openai_text(r)}"))
    with LoopbackStubServer(primary) as gemini_stub, LoopbackStubServer(fallback) as openai_stub:
        clock: list[EngineHarness] = []
        model = FailoverModel(
            [
                FailoverLink(
                    "gemini",
                    "gemini-3-pro",
                    create_model(
                        "gemini", "gemini-3-pro", api_key="k", base_url=gemini_stub.url, **FAST
                    ),
                ),
                FailoverLink(
                    "openai",
                    "gpt-fb",
                    create_model(
                        "openai",
                        "gpt-fb",
                        api_key="k",
                        base_url=openai_stub.url + "/v1",
                        **FAST,
                    ),
                ),
            ],
            breaker=BreakerSettings(failure_threshold=2, cooldown_s=30),
            clock=lambda: clock[0].clock_s(),  # the harness's processing time
        )
        spec = ModelSpec(
            provider="gemini",
            model="gemini-3-pro",
            fallbacks=[FallbackModel(provider="openai", model="gpt-fb")],
        )
        config = AgentConfig(media_store=str(tmp_path / "media"), model=spec)
        h = EngineHarness(
            lambda: AgentRuntime(config, model, ToolRegistry([]), MediaStore(config.media_store)),
            config,
        )
        OPEN.append(h)
        clock.append(h)
        sent: list[str] = []

        def send(phase: str, keys: int) -> None:
            for n in range(keys):
                sent.append(f"{phase}-{n}")
                h.send_input(f"k{n}", f"{phase}-{n}", f"{phase} question {n}")
            h.settle_all()

        send("before", 3)
        primary.down = True
        send("outage", 10)
        breaker = model.breakers[PRIMARY]
        assert breaker.state == "open"
        primary.down = False
        h.advance(30_000)  # the cool-down passes: the next call probes the primary
        send("after", 5)

    outputs = {o["id"]: o for o in h.outputs()}
    answered = sorted(h.answered_ids())
    assert answered == sorted(sent) and len(set(answered)) == len(sent)  # none lost, none twice
    assert h.dead_letters() == []
    by = {phase: [outputs[i]["answered_by"] for i in sent if i.startswith(phase)] for phase in
          ("before", "outage", "after")}  # fmt: skip
    primary_answer = {"provider": "gemini", "model": "gemini-3-pro", "fallback": False}
    fallback_answer = {"provider": "openai", "model": "gpt-fb", "fallback": True}
    assert by["before"] == [primary_answer] * 3
    assert by["outage"] == [fallback_answer] * 10
    assert by["after"] == [primary_answer] * 5
    assert outputs["outage-4"]["text"] == "openai: outage question 4"
    # The breaker opened after two failed calls (two requests each): the other eight skipped
    # the primary at once; one probe closed it again.
    assert primary.served["503"] == 4
    assert breaker.state == "closed"
    assert breaker.changes == {"open": 1, "half_open": 1, "closed": 1}
    # Key k0's memory went on across providers: the primary, back, saw the fallback's answer.
    texts = [
        part.get("text")
        for content in snake(_requests_of_k0(gemini_stub))["contents"]
        for part in content["parts"]
    ]
    assert "openai: outage question 0" in texts
    assert h.count(model_metric(PRIMARY)) == 8
    assert h.count(model_metric(FALLBACK)) == 10
    assert h.count("failovers") == 10
    assert (h.count("breakers_opened"), h.count("breakers_closed"), h.count("breakers_open")) == (
        1,
        1,
        0,
    )
    responses = [e for e in _events(h) if e["event_type"] == "chat_response" and e["key"] == "k1"]
    assert [(e["payload"]["answered_provider"], e["payload"]["fallback"]) for e in responses] == [
        ("gemini", False),
        ("openai", True),
        ("gemini", False),
    ]


def _requests_of_k0(stub: LoopbackStubServer) -> Any:
    """The last request the primary answered for key k0 (the one that asked `after ... 0`)."""
    for request in reversed(stub.requests):
        body = snake(request.json)
        if body["contents"][-1]["parts"][0]["text"] == "after question 0":
            return request.json
    raise AssertionError("no request of k0 after the outage")


def _events(h: EngineHarness) -> list[dict[str, Any]]:
    return [json.loads(text) for channel, text in h.emitted if channel == "events"]
