"""Gemini generation options on the wire: plain ones written into the JSON, the rest
through the SDK's typed config, both in the places the API reads them, on both backends;
a bad option fails before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest
from provider_wire import snake
from pydantic import ValidationError

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import create_model
from streamagents.serde.messages import ChatMessage

OK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ]
}
QUESTION = [ChatMessage.system("be brief"), ChatMessage.user("hi")]


def send(stub: LoopbackStubServer, vertexai: bool = False, **options: Any) -> dict[str, Any]:
    stub.script(OK)
    model = create_model("gemini", "m", api_key="k", base_url=stub.url, vertexai=vertexai)
    model.chat(QUESTION, **options)
    return snake(stub.requests[-1].json)


@pytest.mark.parametrize("vertexai", [False, True], ids=["gemini-api", "vertex"])
def test_plain_and_typed_options_land_where_the_api_reads_them(
    stub: LoopbackStubServer, vertexai: bool
) -> None:
    schema = {"type": "OBJECT", "properties": {"x": {"type": "INTEGER"}}}
    safety = [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]
    body = send(
        stub,
        vertexai,
        temperature=1,
        max_tokens=64,
        stop="END",
        top_k=3,
        seed=7,
        thinking_config={"thinking_budget": 0, "include_thoughts": False},
        labels={"team": "a"},
        response_mime_type="application/json",
        response_schema=schema,
        safety_settings=safety,
    )
    assert body["generation_config"] == {
        "temperature": 1.0,
        "max_output_tokens": 64,
        "stop_sequences": ["END"],
        "top_k": 3.0,
        "seed": 7,
        "thinking_config": {"thinking_budget": 0, "include_thoughts": False},
        "response_mime_type": "application/json",
        "response_schema": schema,
    }
    assert body["labels"] == {"team": "a"}
    assert body["safety_settings"] == safety
    assert body["system_instruction"] == {"role": "user", "parts": [{"text": "be brief"}]}


def test_a_per_call_http_option_reaches_the_request(stub: LoopbackStubServer) -> None:
    send(stub, http_options={"headers": {"x-trace": "t-1"}}, temperature=0.5)
    headers = {k.lower(): v for k, v in stub.requests[-1].headers.items()}
    assert headers["x-trace"] == "t-1"
    assert snake(stub.requests[-1].json)["generation_config"] == {"temperature": 0.5}


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"bogus": 1}, ValidationError),
        ({"temperature": "hot"}, ValidationError),
        ({"max_tokens": 2.5}, ValidationError),
        ({"temperature": 10**400}, ValidationError),
        ({"labels": {"team": 1}}, ValidationError),
        ({"thinking_config": {"budget": 5}}, ValidationError),
        ({"system_instruction": "other"}, TypeError),
        ({"tool_config": {}}, TypeError),
    ],
    ids=lambda value: next(iter(value)) if isinstance(value, dict) else "",
)
def test_a_bad_option_fails_before_anything_is_sent(
    stub: LoopbackStubServer, options: dict[str, Any], error: type[Exception]
) -> None:
    model = create_model("gemini", "m", api_key="k", base_url=stub.url)
    with pytest.raises(error):
        model.chat(QUESTION, **options)
    assert stub.requests == []
