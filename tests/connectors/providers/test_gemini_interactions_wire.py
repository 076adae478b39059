"""Gemini Interactions wire rules (docs/providers.md), asserted on the JSON google-genai sent."""

from __future__ import annotations

import io
import json
from typing import Any
from urllib.parse import parse_qs

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st
from provider_wire import MP4, PDF, PNG, WAV, turn, wire_bytes

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import (
    BadRequest,
    GeminiInteractionsModel,
    UnsupportedContent,
    create_model,
)
from streamagents.connectors.providers.gemini.interactions_wire import legal_call_id, to_request
from streamagents.serde.avro import from_record, parsed_schema, to_record
from streamagents.serde.chat import ToolSpec
from streamagents.serde.events import new_event
from streamagents.serde.messages import (
    AudioPart,
    ChatMessage,
    DocumentPart,
    ImagePart,
    TextPart,
    ToolCall,
    VideoPart,
)

SIGNATURE = "c2lnbmF0dXJlLW9mLXRoZS10aG91Z2h0_-=="
"""A thought signature as the server sent it (mixed alphabet on purpose: echoed verbatim)."""


def interaction(*steps: dict[str, Any], id: str = "int-1", status: str = "completed") -> dict:
    """An Interaction resource as the API returns it (canned, for the stub)."""
    return {
        "id": id,
        "status": status,
        "model": "gemini-3-pro",
        "steps": list(steps),
        "usage": {"total_input_tokens": 11, "total_output_tokens": 5, "total_thought_tokens": 2},
    }


def text_step(text: str) -> dict[str, Any]:
    return {"type": "model_output", "content": [{"type": "text", "text": text}]}


OK = interaction(text_step("ok"))


def model(stub: LoopbackStubServer, **options: Any) -> GeminiInteractionsModel:
    created = create_model(
        "gemini-interactions", "gemini-3-pro", api_key="test-key", base_url=stub.url, **options
    )
    assert isinstance(created, GeminiInteractionsModel)
    return created


def sent(stub: LoopbackStubServer, messages: list[ChatMessage], **options: Any) -> dict[str, Any]:
    """Send `messages` through the real SDK and return the recorded body."""
    stub.script(OK)
    model(stub).chat(messages, **options)
    assert stub.requests[-1].path == "/v1beta/interactions"
    return stub.requests[-1].json


def result_of(stub: LoopbackStubServer, result: ChatMessage) -> Any:
    step = sent(stub, turn(result))["input"][-1]
    assert step["type"] == "function_result"
    return step["result"]


def test_user_media_are_content_items_and_consecutive_user_parts_share_a_step(
    stub: LoopbackStubServer,
) -> None:
    first = ChatMessage.user(
        [
            TextPart(text="compare "),
            ImagePart(mime_type="image/png", data=PNG),
            ImagePart(mime_type="image/jpeg", url="https://example.com/a.jpg"),
            AudioPart(mime_type="audio/wav", data=WAV),
            VideoPart(mime_type="video/mp4", url="gs://bucket/clip.mp4"),
            DocumentPart(mime_type="application/pdf", data=PDF),
            DocumentPart(mime_type="text/plain", data=b"plain notes"),
        ]
    )
    body = sent(stub, [first, ChatMessage.user("and this")])
    assert len(body["input"]) == 1
    content = body["input"][0]["content"]
    assert body["input"][0]["type"] == "user_input"
    assert content[0] == {"type": "text", "text": "compare "}
    assert {k: v for k, v in content[1].items() if k != "data"} == {
        "type": "image",
        "mime_type": "image/png",
    }
    assert wire_bytes(content[1]["data"]) == PNG
    assert content[2] == {
        "type": "image",
        "mime_type": "image/jpeg",
        "uri": "https://example.com/a.jpg",
    }
    assert content[3]["type"] == "audio" and wire_bytes(content[3]["data"]) == WAV
    assert content[4] == {"type": "video", "mime_type": "video/mp4", "uri": "gs://bucket/clip.mp4"}
    assert content[5]["type"] == "document" and wire_bytes(content[5]["data"]) == PDF
    assert content[5]["mime_type"] == "application/pdf"
    assert content[6] == {"type": "text", "text": "plain notes"}
    assert content[7] == {"type": "text", "text": "and this"}


def test_a_tool_result_between_user_parts_splits_them_into_two_steps(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result("call-1", "screenshot", "done")
    body = sent(stub, [*turn(result), ChatMessage.user("next"), ChatMessage.user("question")])
    assert [s["type"] for s in body["input"]] == [
        "user_input",
        "function_call",
        "function_result",
        "user_input",
    ]
    assert body["input"][-1]["content"] == [
        {"type": "text", "text": "next"},
        {"type": "text", "text": "question"},
    ]


def test_a_text_result_is_a_plain_string(stub: LoopbackStubServer) -> None:
    assert result_of(stub, ChatMessage.tool_result("call-1", "t", "it is sunny")) == "it is sunny"
    quoted = ChatMessage.tool_result("call-1", "t", '"a JSON string stays text"')
    assert result_of(stub, quoted) == '"a JSON string stays text"'


def test_a_json_object_result_is_sent_as_the_object(stub: LoopbackStubServer) -> None:
    result = ChatMessage.tool_result("call-1", "t", json.dumps({"temp": 21, "unit": "C"}))
    assert result_of(stub, result) == {"temp": 21, "unit": "C"}


def test_any_other_json_value_is_wrapped_as_result(stub: LoopbackStubServer) -> None:
    for text, value in (("[1, 2]", [1, 2]), ("42", 42), ("true", True), ("null", None)):
        assert result_of(stub, ChatMessage.tool_result("call-1", "t", text)) == {"result": value}


def test_nan_or_deeply_nested_text_is_sent_as_text_not_broken_json(
    stub: LoopbackStubServer,
) -> None:
    assert result_of(stub, ChatMessage.tool_result("call-1", "t", "NaN")) == "NaN"
    assert result_of(stub, ChatMessage.tool_result("call-1", "t", "[NaN]")) == "[NaN]"
    deep = "[" * 100_000 + "]" * 100_000
    assert result_of(stub, ChatMessage.tool_result("call-1", "t", deep)) == deep


def test_a_result_with_media_is_an_array_of_items_in_part_order(stub: LoopbackStubServer) -> None:
    result = ChatMessage.tool_result(
        "call-1",
        "screenshot",
        [
            TextPart(text="home page"),
            ImagePart(mime_type="image/png", data=PNG),
            TextPart(text="and the logo"),
            ImagePart(mime_type="image/webp", url="https://example.com/logo.webp"),
        ],
    )
    items = result_of(stub, result)
    assert items[0] == {"type": "text", "text": "home page"}
    assert items[1]["type"] == "image" and items[1]["mime_type"] == "image/png"
    assert wire_bytes(items[1]["data"]) == PNG
    assert items[2] == {"type": "text", "text": "and the logo"}
    assert items[3] == {
        "type": "image",
        "mime_type": "image/webp",
        "uri": "https://example.com/logo.webp",
    }
    assert len(items) == 4


@pytest.mark.parametrize(
    "part",
    [
        AudioPart(mime_type="audio/wav", data=WAV),
        VideoPart(mime_type="video/mp4", data=MP4),
        DocumentPart(mime_type="application/pdf", data=PDF),
    ],
    ids=lambda p: p.kind,
)
def test_media_a_function_result_cannot_carry_fail_before_sending(
    stub: LoopbackStubServer, part: Any
) -> None:
    result = ChatMessage.tool_result("call-1", "screenshot", [TextPart(text="see"), part])
    with pytest.raises(UnsupportedContent) as caught:
        model(stub).chat(turn(result))
    assert part.kind in str(caught.value)
    assert "text and image items only" in str(caught.value)
    assert "call-1" in str(caught.value)
    assert stub.requests == []


def test_a_failed_tool_sends_is_error_and_a_good_one_does_not(stub: LoopbackStubServer) -> None:
    failed = ChatMessage.tool_result("call-1", "lookup", "timeout", is_error=True)
    step = sent(stub, turn(failed))["input"][-1]
    assert step == {
        "type": "function_result",
        "name": "lookup",
        "call_id": "call-1",
        "result": "timeout",
        "is_error": True,
    }
    fine = ChatMessage.tool_result("call-1", "lookup", "found")
    assert "is_error" not in sent(stub, turn(fine))["input"][-1]


def test_parallel_results_keep_their_own_names_and_ids_in_order(stub: LoopbackStubServer) -> None:
    results = [
        ChatMessage.tool_result("call-a", "weather", "sunny"),
        ChatMessage.tool_result(
            "call-b", "screenshot", [ImagePart(mime_type="image/png", data=PNG)]
        ),
        ChatMessage.tool_result("call-c", "weather", "rain", is_error=True),
    ]
    steps = sent(stub, turn(*results))["input"]
    calls = [s for s in steps if s["type"] == "function_call"]
    answers = [s for s in steps if s["type"] == "function_result"]
    assert [(c["id"], c["name"]) for c in calls] == [
        ("call-a", "weather"),
        ("call-b", "screenshot"),
        ("call-c", "weather"),
    ]
    assert [(a["call_id"], a["name"], a.get("is_error", False)) for a in answers] == [
        ("call-a", "weather", False),
        ("call-b", "screenshot", False),
        ("call-c", "weather", True),
    ]


def test_assistant_text_image_and_calls_become_model_output_and_function_call_steps(
    stub: LoopbackStubServer,
) -> None:
    assistant = ChatMessage(
        role="assistant",
        parts=[TextPart(text="here is a sketch"), ImagePart(mime_type="image/png", data=PNG)],
        tool_calls=[ToolCall(id="call-1", name="save", arguments={"name": "sketch"})],
    )
    steps = sent(stub, [ChatMessage.user("draw"), assistant, ChatMessage.user("thanks")])["input"]
    assert steps[1] == text_step("here is a sketch")
    assert steps[2]["type"] == "model_output"
    assert [i["type"] for i in steps[2]["content"]] == ["image"]
    assert wire_bytes(steps[2]["content"][0]["data"]) == PNG
    assert steps[3] == {
        "type": "function_call",
        "id": "call-1",
        "name": "save",
        "arguments": {"name": "sketch"},
    }


def test_system_messages_fold_into_one_system_instruction_and_tools_are_declared(
    stub: LoopbackStubServer,
) -> None:
    tool = ToolSpec(
        name="weather", description="Weather now", parameters={"type": "object", "properties": {}}
    )
    stub.script(OK)
    model(stub).chat(
        [
            ChatMessage.system("Be brief."),
            ChatMessage.system("Answer in French."),
            ChatMessage.user("hi"),
        ],
        [tool],
        max_tokens=50,
        temperature=0.2,
        stop="END",
    )
    body = stub.requests[-1].json
    assert body["system_instruction"] == "Be brief.\n\nAnswer in French."
    assert body["model"] == "gemini-3-pro"
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Weather now",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    assert body["generation_config"] == {
        "max_output_tokens": 50,
        "temperature": 0.2,
        "stop_sequences": ["END"],
    }
    assert body["store"] is True
    assert "previous_interaction_id" not in body


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "any"),
        (["weather"], {"allowed_tools": {"mode": "validated", "tools": ["weather"]}}),
        ("clock", {"allowed_tools": {"mode": "validated", "tools": ["clock"]}}),
    ],
)
def test_tool_choice_maps_onto_the_wire(stub: LoopbackStubServer, choice: Any, wire: Any) -> None:
    tools = [ToolSpec(name="weather"), ToolSpec(name="clock")]
    stub.script(OK)
    model(stub).chat([ChatMessage.user("hi")], tools, tool_choice=choice)
    assert stub.requests[-1].json["generation_config"] == {"tool_choice": wire}


def test_a_tool_choice_naming_an_undeclared_tool_fails_before_sending(
    stub: LoopbackStubServer,
) -> None:
    with pytest.raises(UnsupportedContent, match="does not declare: search"):
        model(stub).chat(
            [ChatMessage.user("hi")], [ToolSpec(name="weather")], tool_choice=["search"]
        )
    with pytest.raises(UnsupportedContent, match="tool_choice"):
        model(stub).chat([ChatMessage.user("hi")], [ToolSpec(name="weather")], tool_choice=[])
    assert stub.requests == []


def test_call_ids_are_made_legal_alike_for_the_call_and_its_result(
    stub: LoopbackStubServer,
) -> None:
    odd = "toolu:01/ABC def" + "x" * 80
    result = ChatMessage.tool_result(odd, "lookup", "ok")
    steps = sent(stub, turn(result))["input"]
    call_id, result_id = steps[1]["id"], steps[2]["call_id"]
    assert call_id == result_id == legal_call_id(odd)
    assert len(call_id) <= 64 and all(c.isalnum() or c in "_-" for c in call_id)
    assert legal_call_id("call_a-1") == "call_a-1"


@given(st.text(min_size=0, max_size=200), st.text(min_size=0, max_size=200))
def test_legal_call_ids_fit_the_alphabet_and_keep_distinct_ids_distinct(a: str, b: str) -> None:
    for value in (a, b):
        legal = legal_call_id(value)
        assert 1 <= len(legal) <= 64
        assert all(c in "_-" or (c.isascii() and c.isalnum()) for c in legal)
    if a != b:
        assert legal_call_id(a) != legal_call_id(b)


def _thinking_reply() -> dict[str, Any]:
    return interaction(
        {
            "type": "thought",
            "signature": SIGNATURE,
            "summary": [{"type": "text", "text": "The user wants the weather."}],
        },
        {"type": "thought", "summary": [{"type": "text", "text": "redacted: no signature"}]},
        {"type": "thought"},
        {"type": "function_call", "id": "fc-1", "name": "weather", "arguments": {"city": "Oslo"}},
        id="int-7",
    )


def test_thought_signatures_round_trip_through_keyed_state_and_the_event_log(
    stub: LoopbackStubServer,
) -> None:
    stub.script(_thinking_reply())
    reply = model(stub).chat([ChatMessage.user("weather in Oslo?")])
    kept = ChatMessage.model_validate_json(reply.message.model_dump_json())  # keyed state
    event = new_event("chat_response", job_id="j", key="k", run_id="r", sequence=1, messages=[kept])
    buffer = io.BytesIO()  # the event log, at the STANDARD level
    fastavro.schemaless_writer(buffer, parsed_schema(), to_record(event))
    buffer.seek(0)
    logged = from_record(fastavro.schemaless_reader(buffer, parsed_schema())).payload.messages[0]
    for message in (kept, logged):
        result = ChatMessage.tool_result("fc-1", "weather", "sunny")
        steps = sent(stub, [ChatMessage.user("weather in Oslo?"), message, result])["input"]
        assert steps[1] == {
            "type": "thought",
            "signature": SIGNATURE,
            "summary": [{"type": "text", "text": "The user wants the weather."}],
        }
        assert [s["type"] for s in steps] == [
            "user_input",
            "thought",
            "function_call",
            "function_result",
        ]


def test_a_reply_becomes_a_chat_response_with_its_interaction_id(
    stub: LoopbackStubServer,
) -> None:
    image = {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="}
    stub.script(
        interaction(
            {"type": "user_input", "content": [{"type": "text", "text": "echoed input"}]},
            text_step("a picture: "),
            {"type": "model_output", "content": [image]},
            {"type": "function_call", "id": "fc-2", "name": "save", "arguments": {}},
            id="int-9",
            status="requires_action",
        )
    )
    reply = model(stub).chat([ChatMessage.user("draw")])
    message = reply.message
    assert message.content == "a picture: "
    assert [p.kind for p in message.parts] == ["text", "image"]
    assert message.parts[1].data == b"\x89PNG\r\n\x1a\n"
    assert message.tool_calls == [ToolCall(id="fc-2", name="save", arguments={})]
    assert message.metadata == {"interaction_id": "int-9"}
    assert reply.interaction_id == "int-9"
    assert reply.finish_reason == "requires_action"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (11, 7)
    assert reply.model_version == "gemini-3-pro"
    assert reply.continued_from is None


def _conversation(first_reply: ChatMessage) -> list[ChatMessage]:
    return [
        ChatMessage.system("Be brief."),
        ChatMessage.user([TextPart(text="look"), ImagePart(mime_type="image/png", data=PNG)]),
        first_reply,
        ChatMessage.tool_result("fc-1", "weather", "sunny"),
    ]


def test_a_continuation_sends_the_stored_id_and_only_the_newer_steps(
    stub: LoopbackStubServer,
) -> None:
    stub.script(_thinking_reply())
    first = model(stub).chat([ChatMessage.user("weather in Oslo?")])
    stub.script(interaction(text_step("sunny in Oslo"), id="int-8"))
    reply = model(stub).chat(_conversation(first.message), previous_interaction_id="int-7")
    body = stub.requests[-1].json
    assert body["previous_interaction_id"] == "int-7"
    assert body["input"] == [
        {"type": "function_result", "name": "weather", "call_id": "fc-1", "result": "sunny"}
    ]
    assert body["system_instruction"] == "Be brief."
    assert body["store"] is True
    assert (reply.continued_from, reply.interaction_id) == ("int-7", "int-8")


def test_without_the_stored_message_or_with_store_off_the_whole_conversation_goes(
    stub: LoopbackStubServer,
) -> None:
    plain = ChatMessage(role="assistant", tool_calls=[ToolCall(id="fc-1", name="weather")])
    stub.script(OK)
    reply = model(stub).chat(_conversation(plain), previous_interaction_id="int-7")
    body = stub.requests[-1].json
    assert "previous_interaction_id" not in body
    assert [s["type"] for s in body["input"]] == ["user_input", "function_call", "function_result"]
    assert reply.continued_from is None

    stored = plain.model_copy(update={"metadata": {"interaction_id": "int-7"}})
    for options in ({"store": False}, {"continue_stored": False}):
        stub.script(OK)
        reply = model(stub, **options).chat(_conversation(stored), previous_interaction_id="int-7")
        body = stub.requests[-1].json
        assert "previous_interaction_id" not in body
        assert len(body["input"]) == 3
        assert body["store"] is options.get("store", True)
        assert reply.continued_from is None
    assert reply.interaction_id == "int-1"  # stored, though not continued
    stub.script(OK)
    unstored = model(stub, store=False).chat([ChatMessage.user("hi")])
    assert unstored.interaction_id is None and unstored.message.metadata == {}


def test_an_interaction_the_server_no_longer_holds_falls_back_to_the_whole_conversation_once(
    stub: LoopbackStubServer,
) -> None:
    stored = ChatMessage(
        role="assistant",
        tool_calls=[ToolCall(id="fc-1", name="weather")],
        metadata={"interaction_id": "int-gone"},
    )
    gone = {"error": {"code": 404, "message": "Interaction not found", "status": "NOT_FOUND"}}
    stub.script(StubReply(gone, status=404), interaction(text_step("sunny"), id="int-new"))
    reply = model(stub).chat(_conversation(stored), previous_interaction_id="int-gone")
    first, second = (r.json for r in stub.requests)
    assert first["previous_interaction_id"] == "int-gone" and len(first["input"]) == 1
    assert "previous_interaction_id" not in second and len(second["input"]) == 3
    assert reply.continued_from is None
    assert reply.interaction_id == "int-new"
    assert "int-gone is gone" in (reply.continuation_fallback or "")
    assert "sent the whole conversation" in (reply.continuation_fallback or "")

    stub.script(StubReply(gone, status=404), StubReply(gone, status=404))
    with pytest.raises(BadRequest) as caught:
        model(stub).chat(_conversation(stored), previous_interaction_id="int-gone")
    assert caught.value.status == 404
    assert len(stub.requests) == 4  # one fallback, no more

    plain = stored.model_copy(update={"metadata": {}})  # nothing to continue: no fallback
    stub.script(StubReply(gone, status=404))
    with pytest.raises(BadRequest):
        model(stub).chat(_conversation(plain), previous_interaction_id="int-gone")
    assert len(stub.requests) == 5


def test_a_failed_interaction_is_a_server_error_and_a_non_object_is_malformed() -> None:
    from streamagents.connectors.providers import MalformedResponse, ServerError
    from streamagents.connectors.providers.gemini.interactions_wire import from_response

    failed = {"id": "i", "status": "failed", "errors": [{"code": 13, "message": "internal"}]}
    with pytest.raises(ServerError, match="internal"):
        from_response(failed, model="m")
    with pytest.raises(MalformedResponse):
        from_response(["not", "an", "interaction"], model="m")
    with pytest.raises(MalformedResponse):
        from_response({"steps": "nope"}, model="m")


def test_to_request_is_pure_and_the_body_is_plain_json() -> None:
    request = to_request(
        turn(ChatMessage.tool_result("c", "t", [ImagePart(mime_type="image/png", data=PNG)])),
        model="gemini-3-pro",
        stored=True,
    )
    assert json.loads(json.dumps(request.body)) == request.body
    assert request.continued_from is None


def test_options_this_wire_does_not_take_are_refused() -> None:
    with pytest.raises(ValueError, match="Vertex AI"):
        create_model("gemini-interactions", "m", vertexai=True, api_key="k")
    with pytest.raises(ValueError, match="legacy_tool_media"):
        create_model("gemini-interactions", "m", legacy_tool_media=True, api_key="k")


def sse(*events: dict[str, Any], done: bool = True) -> StubReply:
    """A server-sent event stream as the API writes it (`event:` and `data:` lines)."""
    text = "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    if done:
        text += "event: done\ndata: [DONE]\n\n"
    return StubReply(text.encode(), headers={"Content-Type": "text/event-stream"})


def start(index: int, **step: Any) -> dict[str, Any]:
    return {"event_type": "step.start", "index": index, "step": step}


def delta(index: int, **change: Any) -> dict[str, Any]:
    return {"event_type": "step.delta", "index": index, "delta": change}


def stop(index: int) -> dict[str, Any]:
    return {"event_type": "step.stop", "index": index}


def lifecycle(kind: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "event_type": f"interaction.{kind}",
        "interaction": {"id": "int-s", "status": status, **extra},
    }


STREAM = [
    {"event_id": f"e{number}", **event}
    for number, event in enumerate(
        [
            lifecycle("created", "in_progress"),
            start(0, type="thought", signature=""),
            delta(0, type="thought_summary", content={"type": "text", "text": "Weather, then."}),
            delta(0, type="thought_signature", signature=SIGNATURE),
            stop(0),
            start(1, type="model_output", content=[]),
            delta(1, type="text", text="Checking "),
            delta(1, type="text", text="Oslo."),
            stop(1),
            start(2, type="function_call", id="fc-9", name="weather", arguments={}),
            delta(2, type="arguments_delta", arguments='{"city": '),
            delta(2, type="arguments_delta", arguments='"Oslo"}'),
            stop(2),
            {
                "event_type": "interaction.status_update",
                "interaction_id": "int-s",
                "status": "requires_action",
            },
            lifecycle(
                "completed",
                "requires_action",
                usage={"total_input_tokens": 9, "total_output_tokens": 4, "total_cached_tokens": 6},
            ),
        ],
        start=1,
    )
]
"""A streamed reply: a thought, text, a call with streamed arguments; event ids e1-e15."""


def check_streamed(reply: Any) -> None:
    assert reply.message.content == "Checking Oslo."
    assert reply.message.tool_calls == [
        ToolCall(id="fc-9", name="weather", arguments={"city": "Oslo"})
    ]
    assert reply.message.metadata["thoughts"] == [
        {"signature": SIGNATURE.encode(), "summary": ["Weather, then."]}
    ]
    assert (reply.interaction_id, reply.finish_reason) == ("int-s", "requires_action")
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (9, 4)
    assert reply.usage.cached_tokens == 6


def test_a_streamed_reply_is_assembled_from_its_events(stub: LoopbackStubServer) -> None:
    stub.script(sse(*STREAM))
    reply = model(stub, stream=True).chat([ChatMessage.user("weather in Oslo?")])
    (request,) = stub.requests
    assert (request.method, request.path) == ("POST", "/v1beta/interactions")
    assert request.json["stream"] is True
    assert request.json["input"] == [
        {"type": "user_input", "content": [{"type": "text", "text": "weather in Oslo?"}]}
    ]
    check_streamed(reply)


def test_a_cut_stream_is_resumed_from_its_last_event_not_started_again(
    stub: LoopbackStubServer,
) -> None:
    stub.script(sse(*STREAM[:7], done=False), sse(*STREAM[7:9], done=False), sse(*STREAM[9:]))
    reply = model(stub, stream=True).chat([ChatMessage.user("weather in Oslo?")])
    sent = [(r.method, *r.path.split("?")) for r in stub.requests[1:]]
    assert [(m, p, parse_qs(q)) for m, p, q in sent] == [
        ("GET", "/v1beta/interactions/int-s", {"stream": ["true"], "last_event_id": ["e7"]}),
        ("GET", "/v1beta/interactions/int-s", {"stream": ["true"], "last_event_id": ["e9"]}),
    ]
    assert (stub.requests[0].method, stub.requests[0].path) == ("POST", "/v1beta/interactions")
    check_streamed(reply)


def test_a_stream_cut_before_the_interaction_exists_is_sent_again(
    stub: LoopbackStubServer,
) -> None:
    stub.script(sse(done=False), sse(*STREAM))
    fast = {"initial_delay_s": 0.01, "max_delay_s": 0.02}
    from streamagents.connectors.providers import RetryPolicy

    reply = model(stub, stream=True, retry=RetryPolicy(**fast)).chat([ChatMessage.user("hi")])
    assert [r.method for r in stub.requests] == ["POST", "POST"]
    check_streamed(reply)


def test_a_stream_that_keeps_ending_without_new_events_gives_up(stub: LoopbackStubServer) -> None:
    from streamagents.connectors.providers import ConnectionFailed

    stub.script(sse(*STREAM[:3], done=False), *[sse(done=False)] * 3)
    with pytest.raises(ConnectionFailed, match="ended early 2 times in a row"):
        model(stub, stream=True, max_retries=0, max_stream_resumes=1).chat([ChatMessage.user("hi")])
    assert [r.method for r in stub.requests] == ["POST", "GET"]


def test_stream_errors_map_like_any_other(stub: LoopbackStubServer) -> None:
    from streamagents.connectors.providers import RateLimited, ServerError

    error = {
        "event_type": "error",
        "event_id": "e2",
        "error": {"code": "INTERNAL", "message": "boom"},
    }
    stub.script(sse(STREAM[0], error))
    with pytest.raises(ServerError, match="boom"):
        model(stub, stream=True, max_retries=0).chat([ChatMessage.user("hi")])
    limited = {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    stub.script(StubReply(limited, status=429, headers={"retry-after": "7"}))
    with pytest.raises(RateLimited) as caught:
        model(stub, stream=True, max_retries=0).chat([ChatMessage.user("hi")])
    assert (caught.value.status, caught.value.code, caught.value.retry_after) == (
        429,
        "RESOURCE_EXHAUSTED",
        7.0,
    )
