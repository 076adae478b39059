"""The demo model is a test double on Gemini's wire: the real google-genai SDK talks to it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from google import genai
from google.genai import types

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import GeminiChatModel, create_model
from streamagents.connectors.providers.gemini import ContextCacheSettings
from streamagents.jobs.examples.demo_responder import DEMO_PREFIX, respond
from streamagents.jobs.examples.support_tools import fetch_attachment, lookup_order
from streamagents.jobs.model_choice import demo_server, model_spec
from streamagents.jobs.spec import ModelEntry
from streamagents.serde.messages import ChatMessage

TOOLS = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name=name,
                description=name,
                parameters_json_schema={
                    "type": "object",
                    "properties": {arg: {"type": "string"}},
                    "required": [arg],
                },
            )
            for name, arg in (("lookup_order", "order_id"), ("fetch_attachment", "name"))
        ]
    )
]


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LoopbackStubServer(respond) as stub:
        yield genai.Client(
            api_key="demo-placeholder",
            http_options=types.HttpOptions(base_url=stub.url, api_version="v1beta"),
        )


def test_ticket_turn_gets_one_call_per_order_and_attachment(client: genai.Client) -> None:
    reply = client.models.generate_content(
        model="support-demo",
        contents="Order O-5521: see invoice-O-5521.pdf",
        config=types.GenerateContentConfig(tools=TOOLS),
    )
    calls = [(c.name, c.args) for c in reply.function_calls or []]
    assert calls == [
        ("lookup_order", {"order_id": "O-5521"}),
        ("fetch_attachment", {"name": "invoice-O-5521.pdf"}),
    ]


def test_answer_reports_tool_results_and_media_and_says_it_is_a_demo(
    client: genai.Client,
) -> None:
    question = types.Content(role="user", parts=[types.Part(text="Order O-5521, invoice.pdf")])
    first = client.models.generate_content(
        model="support-demo", contents=[question], config=types.GenerateContentConfig(tools=TOOLS)
    )
    pdf = fetch_attachment("invoice-O-5521.pdf")
    assert pdf.data is not None
    results = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="demo-call-1",
                    name="lookup_order",
                    response={"result": json.dumps(lookup_order("O-5521"))},
                )
            ),
            types.Part(
                function_response=types.FunctionResponse(
                    id="demo-call-2",
                    name="fetch_attachment",
                    response={"result": ""},
                    parts=[
                        types.FunctionResponsePart(
                            inline_data=types.FunctionResponseBlob(
                                mime_type="application/pdf", data=pdf.data
                            )
                        )
                    ],
                )
            ),
        ],
    )
    answer = client.models.generate_content(
        model="support-demo",
        contents=[question, first.candidates[0].content, results],
        config=types.GenerateContentConfig(tools=TOOLS),
    )
    assert answer.text.startswith(DEMO_PREFIX)
    assert "order O-5521 is delivered" in answer.text
    assert f"application/pdf received ({len(pdf.data)} bytes)" in answer.text
    assert answer.usage_metadata.prompt_token_count > 0


def test_unknown_order_is_reported_as_not_found(client: genai.Client) -> None:
    contents = [
        types.Content(role="user", parts=[types.Part(text="Where is O-9999?")]),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        name="lookup_order",
                        response={"result": json.dumps(lookup_order("O-9999"))},
                    )
                )
            ],
        ),
    ]
    answer = client.models.generate_content(model="support-demo", contents=contents)
    assert "order O-9999 was not found" in answer.text


def test_the_demo_model_serves_context_caching_through_its_cache_double() -> None:
    entry = ModelEntry(
        provider="demo",
        model="support-demo",
        responder="streamagents.jobs.examples.demo_responder:respond",
    )
    with demo_server(entry) as url:
        spec = model_spec(entry, url)
        model = create_model(
            spec.provider,
            spec.model,
            **spec.options,
            context_cache=ContextCacheSettings(),
        )
        assert isinstance(model, GeminiChatModel) and model.context_cache is not None
        cache = model.context_cache
        request = [ChatMessage.system("You are the support demo."), ChatMessage.user("hello")]

        async def turns() -> list[str | None]:
            names = [(await model.achat(request)).cached_content]
            for _ in range(100):  # creation runs beside the turns; wait for it here
                if cache.name is not None:
                    break
                await asyncio.sleep(0.01)
            names.append((await model.achat(request)).cached_content)
            return names

        names = asyncio.run(turns())
    assert names == [None, "cachedContents/stub-1"]
    assert cache.off_reason is None
