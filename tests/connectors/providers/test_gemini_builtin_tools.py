"""Gemini built-in server-side tools: the request's tools array and flag per combination and
backend, and their evidence parsed from the reply (asserted through the real SDK)."""

from __future__ import annotations

import io
import itertools
from typing import Any

import fastavro
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import create_model
from streamagents.connectors.providers.gemini.wire import BUILTIN_TOOLS, from_response
from streamagents.serde.avro import parsed_schema, to_record
from streamagents.serde.chat import GroundingSource, ToolSpec
from streamagents.serde.events import new_event
from streamagents.serde.messages import ChatMessage

OK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ]
}
LOOKUP = ToolSpec(name="lookup", description="Looks an order up.")
NAMES = list(BUILTIN_TOOLS)
COMBINATIONS = [c for n in range(len(NAMES) + 1) for c in itertools.combinations(NAMES, n)]
CAMEL = {
    "google_search": "googleSearch",
    "url_context": "urlContext",
    "code_execution": "codeExecution",
}


def sent(
    stub: LoopbackStubServer, builtin: tuple[str, ...], functions: bool, vertexai: bool
) -> dict[str, Any]:
    options: dict[str, Any] = {"builtin_tools": builtin, "vertexai": vertexai}
    model = create_model("gemini", "gemini-3-pro", api_key="k", base_url=stub.url, **options)
    stub.script(OK)
    model.chat([ChatMessage.user("hi")], [LOOKUP] if functions else [])
    body = stub.requests[-1].json
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("vertexai", [False, True], ids=["gemini-api", "vertex"])
@pytest.mark.parametrize("functions", [False, True], ids=["no-functions", "functions"])
@pytest.mark.parametrize("builtin", COMBINATIONS, ids=lambda c: "+".join(c) or "none")
def test_each_builtin_is_its_own_tools_entry_beside_the_declarations(
    stub: LoopbackStubServer, builtin: tuple[str, ...], functions: bool, vertexai: bool
) -> None:
    body = sent(stub, builtin, functions, vertexai)
    # The SDK's converter puts the function declarations entry last.
    expected: list[dict[str, Any]] = [{CAMEL[name]: {}} for name in builtin]
    expected += [{"functionDeclarations": [{"name": "lookup"}]}] if functions else []
    names_only = [
        {"functionDeclarations": [{"name": d["name"]} for d in e["functionDeclarations"]]}
        if "functionDeclarations" in e
        else e
        for e in body.get("tools", [])
    ]
    assert names_only == expected
    flag = body.get("toolConfig", {}).get("includeServerSideToolInvocations")
    # The combination flag: on the Gemini API only, and only when both kinds are present.
    assert flag is (True if functions and builtin and not vertexai else None)


def test_vertex_request_goes_to_the_vertex_path_without_the_flag(stub: LoopbackStubServer) -> None:
    sent(stub, ("google_search",), True, vertexai=True)
    assert stub.requests[-1].path.startswith("/v1beta1/publishers/google/models/")


def test_an_unknown_builtin_is_refused_before_anything_is_sent(stub: LoopbackStubServer) -> None:
    model = create_model("gemini", "m", api_key="k", base_url=stub.url, builtin_tools=("maps",))
    with pytest.raises(ValueError, match="unknown built-in tool"):
        model.chat([ChatMessage.user("hi")])
    assert stub.requests == []


GROUNDED = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"executableCode": {"language": "PYTHON", "code": "print(6*7)"}},
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}},
                    {"text": "It is 42, per "},
                    {"text": "the docs."},
                ],
            },
            "finishReason": "STOP",
            "groundingMetadata": {
                "webSearchQueries": ["answer to everything"],
                "groundingChunks": [
                    {"web": {"uri": "https://example.org/a", "title": "A"}},
                    {"web": {"uri": "https://example.org/b"}},
                    {"retrievedContext": {"uri": "gs://not/web"}},
                ],
            },
            "urlContextMetadata": {
                "urlMetadata": [
                    {
                        "retrievedUrl": "https://example.org/manual",
                        "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
                    }
                ]
            },
        }
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3},
}


def test_evidence_is_parsed_through_the_sdk_and_kept_out_of_the_message(
    stub: LoopbackStubServer,
) -> None:
    model = create_model("gemini", "m", api_key="k", base_url=stub.url, builtin_tools=NAMES)
    stub.script(GROUNDED)
    response = model.chat([ChatMessage.user("what is it?")])
    assert response.message.content == "It is 42, per the docs."
    assert [p.text for p in response.message.text_parts()] == ["It is 42, per ", "the docs."]
    search, url, code = response.evidence
    assert search.tool == "google_search"
    assert search.queries == ["answer to everything"]
    assert search.sources == [
        GroundingSource(uri="https://example.org/a", title="A"),
        GroundingSource(uri="https://example.org/b", title=""),
    ]
    assert (url.tool, url.url, url.status) == (
        "url_context",
        "https://example.org/manual",
        "URL_RETRIEVAL_STATUS_SUCCESS",
    )
    assert (code.tool, code.language, code.code, code.outcome, code.output) == (
        "code_execution",
        "PYTHON",
        "print(6*7)",
        "OUTCOME_OK",
        "42\n",
    )


def test_evidence_is_never_sent_back_as_conversation(stub: LoopbackStubServer) -> None:
    model = create_model("gemini", "m", api_key="k", base_url=stub.url, builtin_tools=NAMES)
    stub.script(GROUNDED, OK)
    first = model.chat([ChatMessage.user("what is it?")])
    model.chat([ChatMessage.user("what is it?"), first.message, ChatMessage.user("sure?")])
    sent_back = stub.requests[-1].body.decode()
    for leaked in ("print(6*7)", "OUTCOME_OK", "example.org", "answer to everything"):
        assert leaked not in sent_back


@pytest.mark.parametrize(
    "candidate",
    [
        {"groundingMetadata": {}},
        {"groundingMetadata": {"groundingChunks": "junk", "webSearchQueries": None}},
        {"urlContextMetadata": {"urlMetadata": [None, {"urlRetrievalStatus": "X"}]}},
        {"content": {"parts": [{"codeExecutionResult": {"output": "orphan"}}]}},
    ],
)
def test_odd_or_damaged_metadata_gives_what_it_holds_and_no_error(
    candidate: dict[str, Any],
) -> None:
    reply = {"candidates": [{"finishReason": "STOP", **candidate}]}
    evidence = from_response(reply, model="m").evidence
    assert [e.tool for e in evidence] == (["code_execution"] if "content" in candidate else [])
    if evidence:
        assert evidence[0].output == "orphan" and evidence[0].code is None


TEXT = st.text() | st.sampled_from(["\ud800", "a\udfffb", "\x00", "é" * 3000])
"""Text as JSON can carry it: lone surrogates (not valid UTF-8), NUL, long runs."""
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    [
        "webSearchQueries",
        "groundingChunks",
        "web",
        "uri",
        "title",
        "urlMetadata",
        "retrievedUrl",
        "urlRetrievalStatus",
        "language",
        "code",
        "outcome",
        "output",
    ]
)
SHAPED = st.recursive(
    JSON,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(FIELD_NAMES, inner, max_size=4),
    max_leaves=16,
)


SURROGATES = "a\ud800"


@settings(max_examples=120, deadline=None)
@example(
    grounding={
        "webSearchQueries": [SURROGATES],
        "groundingChunks": [{"web": {"uri": SURROGATES, "title": SURROGATES}}],
    },
    url_context={"urlMetadata": [{"retrievedUrl": SURROGATES, "urlRetrievalStatus": 1.5}]},
    code={"language": SURROGATES, "code": SURROGATES},
    result={"outcome": SURROGATES, "output": SURROGATES},
)
@given(grounding=SHAPED, url_context=SHAPED, code=SHAPED, result=SHAPED)
def test_any_metadata_shape_parses_and_its_evidence_goes_into_the_event_log(
    grounding: Any, url_context: Any, code: Any, result: Any
) -> None:
    reply = {
        "candidates": [
            {
                "finishReason": "STOP",
                "content": {"parts": [{"executableCode": code}, {"codeExecutionResult": result}]},
                "groundingMetadata": grounding,
                "urlContextMetadata": url_context,
            }
        ]
    }
    evidence = from_response(reply, model="m").evidence
    event = new_event("server_tool", job_id="j", key="k", run_id="r", sequence=1, evidence=evidence)
    for level in ("standard", "verbose"):
        fastavro.writer(io.BytesIO(), parsed_schema(), [to_record(event, level=level)])
