"""The runtime with Gemini's built-in tools and agent documents, through the real SDK
against the loopback stub: evidence becomes server_tool events linked to their response."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from doubles import drive
from pydantic import ValidationError

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, ModelSpec

GROUNDED = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "Open 9 to 5."}]},
            "finishReason": "STOP",
            "groundingMetadata": {
                "webSearchQueries": ["shop opening hours"],
                "groundingChunks": [
                    {"web": {"uri": "https://example.org/hours", "title": "Hours"}},
                    {"web": {"uri": "https://example.org/faq", "title": "FAQ"}},
                ],
            },
            "urlContextMetadata": {
                "urlMetadata": [
                    {
                        "retrievedUrl": "https://example.org/hours",
                        "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
                    }
                ]
            },
        }
    ],
    "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 4},
}


def config(stub: LoopbackStubServer, tmp_path: Path, **extra: Any) -> AgentConfig:
    return AgentConfig(
        model=ModelSpec(
            provider="gemini",
            model="gemini-3-flash",
            options={"api_key": "k", "base_url": stub.url, "max_retries": 0},
        ),
        system_prompt="Answer about the shop.",
        media_store=str(tmp_path / "media"),
        **extra,
    )


def test_evidence_becomes_server_tool_events_linked_to_the_response(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.txt"
    policy.write_text("Returns within 30 days.")
    runtime = AgentRuntime.from_config(
        config(
            stub,
            tmp_path,
            builtin_tools={"google_search": True, "url_context": True},
            documents=[str(policy), "https://example.org/manual.pdf"],
        )
    )
    stub.script(GROUNDED)
    done = drive(runtime, json.dumps({"id": "in-1", "key": "k", "text": "When are you open?"}))
    assert done.output["status"] == "ok" and done.output["text"] == "Open 9 to 5."
    body = stub.requests[0].json
    assert body["tools"] == [{"googleSearch": {}}, {"urlContext": {}}]
    assert "toolConfig" not in body  # no function tools: no combination flag
    documents, question = body["contents"]
    assert "text/plain" in json.dumps(documents["parts"][0]["inlineData"])
    assert "manual.pdf" in json.dumps(documents["parts"][1])
    assert question["parts"] == [{"text": "When are you open?"}]
    types = [e["event_type"] for e in done.events]
    assert types == [
        "input",
        "chat_request",
        "chat_response",
        "server_tool",
        "server_tool",
        "output",
    ]
    response = done.events[2]
    assert response["payload"]["attributes"]["sources"] == "2"
    search, url = done.events[3:5]
    assert search["upstream_event_id"] == url["upstream_event_id"] == response["event_id"]
    assert search["payload"]["evidence"][0]["queries"] == ["shop opening hours"]
    assert [s["title"] for s in search["payload"]["evidence"][0]["sources"]] == ["Hours", "FAQ"]
    assert url["payload"]["evidence"][0]["status"] == "URL_RETRIEVAL_STATUS_SUCCESS"
    # The conversation kept for the key holds the answer, not the evidence or documents.
    assert done.history is not None
    assert "example.org" not in json.dumps([m.model_dump(mode="json") for m in done.history])


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "gemini-interactions"])
@pytest.mark.parametrize(
    "field,value",
    [("builtin_tools", {"code_execution": True}), ("context_cache", {"enabled": True})],
)
def test_extras_on_another_wire_are_refused_naming_field_and_provider(
    provider: str, field: str, value: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError) as error:
        AgentConfig(model=ModelSpec(provider=provider, model="m"), **{field: value})
    message = str(error.value)
    assert f"{field}:" in message and repr(provider) in message


def test_a_document_without_a_known_type_is_refused_at_build(
    stub: LoopbackStubServer, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="cannot tell the media type of 'https://x/blob'"):
        AgentRuntime.from_config(config(stub, tmp_path, documents=["https://x/blob"]))
