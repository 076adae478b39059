"""Gemini wire behaviour 1-11 (docs/providers.md), asserted on the JSON google-genai sent."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from provider_wire import MP4, PDF, PNG, WAV, blob_bytes, snake, turn, wire_bytes
from pydantic import ValidationError

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import (
    GeminiChatModel,
    InvalidContent,
    UnsupportedContent,
    create_model,
)
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import (
    AudioPart,
    ChatMessage,
    DocumentPart,
    ImagePart,
    MediaRef,
    TextPart,
    ToolCall,
    VideoPart,
)

OK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ]
}
CALL = ToolCall(id="call-1", name="screenshot", arguments={"page": "home"})


def model(stub: LoopbackStubServer, **options: Any) -> GeminiChatModel:
    created = create_model(
        "gemini", "gemini-3-pro", api_key="test-key", base_url=stub.url, **options
    )
    assert isinstance(created, GeminiChatModel)
    return created


def sent(stub: LoopbackStubServer, messages: list[ChatMessage], **options: Any) -> dict[str, Any]:
    """Send `messages` through the real SDK and return the recorded body, keys in snake_case."""
    stub.script(OK)
    model(stub, **options).chat(messages)
    return snake(stub.requests[-1].json)


def last_turn(body: dict[str, Any]) -> dict[str, Any]:
    return body["contents"][-1]


def test_1_tool_result_with_media_is_one_user_turn_with_one_function_response(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result(
        "call-1",
        "screenshot",
        [
            TextPart(text="home page, "),
            ImagePart(mime_type="image/png", data=PNG),
            TextPart(text="and its sound"),
            AudioPart(mime_type="audio/wav", data=WAV),
        ],
    )
    body = sent(stub, turn(result))
    assert stub.requests[-1].path == "/v1/models/gemini-3-pro:generateContent"
    last = last_turn(body)
    assert last["role"] == "user"
    assert len(last["parts"]) == 1
    response = last["parts"][0]["function_response"]
    assert response["name"] == "screenshot"
    assert response["id"] == "call-1"
    assert response["response"] == {"result": "home page, and its sound"}
    assert [p["inline_data"]["mime_type"] for p in response["parts"]] == ["image/png", "audio/wav"]
    assert [blob_bytes(p["inline_data"]) for p in response["parts"]] == [PNG, WAV]

    media_only = ChatMessage.tool_result(
        "call-1", "screenshot", [ImagePart(mime_type="image/png", data=PNG)]
    )
    response = last_turn(sent(stub, turn(media_only)))["parts"][0]["function_response"]
    assert response["response"] == {"result": ""}


def test_2_inline_data_is_a_blob_and_a_url_is_file_data_with_no_display_name(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result(
        "call-1",
        "screenshot",
        [
            ImagePart(mime_type="image/png", data=PNG),
            DocumentPart(mime_type="application/pdf", url="gs://bucket/report.pdf"),
        ],
    )
    parts = last_turn(sent(stub, turn(result)))["parts"][0]["function_response"]["parts"]
    assert parts[0] == {
        "inline_data": {"mime_type": "image/png", "data": parts[0]["inline_data"]["data"]}
    }
    assert blob_bytes(parts[0]["inline_data"]) == PNG
    assert parts[1] == {
        "file_data": {"file_uri": "gs://bucket/report.pdf", "mime_type": "application/pdf"}
    }


def test_3_tool_result_media_carry_the_same_values_as_in_a_user_message(
    stub: LoopbackStubServer,
) -> None:
    media = [
        ImagePart(mime_type="image/png", data=PNG),
        VideoPart(mime_type="video/mp4", url="https://example.com/clip.mp4"),
    ]
    user = ChatMessage.user([TextPart(text="compare"), *media])
    result = ChatMessage.tool_result("call-1", "screenshot", media)
    body = sent(stub, [user, ChatMessage(role="assistant", tool_calls=[CALL]), result])
    in_user = body["contents"][0]["parts"][1:]
    in_tool = body["contents"][-1]["parts"][0]["function_response"]["parts"]

    def values(part: dict[str, Any]) -> dict[str, Any]:
        source = part.get("inline_data") or part["file_data"]
        decoded = {**source, "data": blob_bytes(source)} if "data" in source else source
        return {"source": "inline_data" if "inline_data" in part else "file_data", **decoded}

    assert [values(p) for p in in_tool] == [values(p) for p in in_user]


def test_4_image_audio_video_and_document_all_pass_in_tool_results(
    stub: LoopbackStubServer,
) -> None:
    media = [
        ImagePart(mime_type="image/x-portable-anymap", data=PNG),
        AudioPart(mime_type="audio/ogg", data=WAV),
        VideoPart(mime_type="video/webm", data=MP4),
        DocumentPart(mime_type="text/csv", data=b"a,b\n1,2\n"),
        DocumentPart(mime_type="application/pdf", data=PDF),
    ]
    result = ChatMessage.tool_result("call-1", "screenshot", media)
    parts = last_turn(sent(stub, turn(result)))["parts"][0]["function_response"]["parts"]
    assert [p["inline_data"]["mime_type"] for p in parts] == [m.mime_type for m in media]
    assert [blob_bytes(p["inline_data"]) for p in parts] == [m.data for m in media]


def test_5_text_only_tool_result_is_sent_as_a_text_result_always_was(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result("call-1", "screenshot", "42 items")
    as_parts = ChatMessage.tool_result("call-1", "screenshot", [TextPart(text="42 items")])
    for message in (result, as_parts):
        last = last_turn(sent(stub, turn(message)))
        assert last == {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "id": "call-1",
                        "name": "screenshot",
                        "response": {"result": "42 items"},
                    }
                }
            ],
        }


def test_6_malformed_base64_fails_while_building_with_the_user_message_error(
    stub: LoopbackStubServer,
) -> None:
    bad = {"kind": "image", "mime_type": "image/png", "data": "not base64!"}
    with pytest.raises(ValidationError) as model_error:
        ImagePart.model_validate(bad)
    model_sentence = model_error.value.errors()[0]["ctx"]["error"]
    # As JSON (dicts), the form a replayed log or a caller without the model classes uses.
    user = {"role": "user", "parts": [bad]}
    tool = {"role": "tool", "tool_call_id": "call-1", "name": "screenshot", "parts": [bad]}
    # Built without validation (model_construct), so the text reaches the adapter as is.
    unchecked = ImagePart.model_construct(**bad, url=None, ref=None, metadata={})
    unchecked_user = ChatMessage.model_construct(role="user", parts=[unchecked])
    unchecked_tool = ChatMessage.model_construct(
        role="tool", tool_call_id="call-1", name="screenshot", parts=[unchecked]
    )
    gemini = model(stub)
    errors = []
    for message in (user, tool, unchecked_user, unchecked_tool):
        with pytest.raises(InvalidContent) as raised:
            gemini.chat([ChatMessage.user("hi"), message])
        errors.append(raised.value)
    assert {type(e) for e in errors} == {InvalidContent}
    assert {str(e) for e in errors} == {str(model_sentence)}
    assert "malformed base64" in str(errors[0])
    assert "not base64!" not in str(errors[0])
    assert stub.requests == []


def test_6_corrupt_store_bytes_fail_alike_in_user_messages_and_tool_results(
    stub: LoopbackStubServer, tmp_path: Any
) -> None:
    store = MediaStore(str(tmp_path / "media"))
    ref = store.put(PNG, "image/png")
    ref_path = tmp_path / "media" / "sha256" / ref.sha256[:2] / ref.sha256
    ref_path.write_bytes(b"tampered")
    part = ImagePart(mime_type="image/png", ref=ref)
    user = ChatMessage.user([part])
    tool = ChatMessage.tool_result("call-1", "screenshot", [part])
    gemini = model(stub, media_store=store)
    messages = []
    for message in (user, tool):
        with pytest.raises(InvalidContent) as raised:
            gemini.chat([message] if message is user else turn(message))
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert "corrupt" in messages[0]
    assert stub.requests == []


def test_store_refs_are_sent_as_the_stored_bytes(stub: LoopbackStubServer, tmp_path: Any) -> None:
    store = MediaStore(str(tmp_path / "media"))
    ref: MediaRef = store.put(PNG, "image/png")
    result = ChatMessage.tool_result(
        "call-1", "screenshot", [ImagePart(mime_type="image/png", ref=ref)]
    )
    parts = last_turn(sent(stub, turn(result), media_store=store))["parts"][0]["function_response"][
        "parts"
    ]
    assert blob_bytes(parts[0]["inline_data"]) == PNG


def test_7_media_in_an_assistant_message_fails_naming_the_rule_not_the_data(
    stub: LoopbackStubServer,
) -> None:
    url = "https://example.com/secret-chart.png"
    assistant = ChatMessage(
        role="assistant",
        parts=[
            TextPart(text="here"),
            ImagePart(mime_type="image/png", url=url),
            ImagePart(mime_type="image/png", data=PNG),
        ],
    )
    with pytest.raises(UnsupportedContent) as raised:
        model(stub).chat([ChatMessage.user("draw"), assistant, ChatMessage.user("again")])
    message = str(raised.value)
    assert "only user messages and tool results carry media" in message
    assert url not in message
    assert base64.b64encode(PNG).decode()[:16] not in message
    assert stub.requests == []


def test_8_the_tool_error_flag_is_not_sent_with_or_without_media(
    stub: LoopbackStubServer,
) -> None:
    failed_text = ChatMessage.tool_result("call-1", "screenshot", "timeout", is_error=True)
    failed_media = ChatMessage.tool_result(
        "call-1",
        "screenshot",
        [TextPart(text="partial"), ImagePart(mime_type="image/png", data=PNG)],
        is_error=True,
    )
    for message, text in ((failed_text, "timeout"), (failed_media, "partial")):
        response = last_turn(sent(stub, turn(message)))["parts"][0]["function_response"]
        assert response["response"] == {"result": text}
        assert "error" not in json.dumps(stub.requests[-1].json).lower()


def test_9_parallel_tool_results_each_keep_their_own_name_and_id_in_order(
    stub: LoopbackStubServer,
) -> None:
    first = ChatMessage.tool_result(
        "call-a", "screenshot", [ImagePart(mime_type="image/png", data=PNG)]
    )
    second = ChatMessage.tool_result("call-b", "weather", "sunny")
    third = ChatMessage.tool_result(
        "call-c", "recording", [AudioPart(mime_type="audio/wav", data=WAV)]
    )
    last = last_turn(sent(stub, turn(first, second, third)))
    responses = [p["function_response"] for p in last["parts"]]
    assert [(r["id"], r["name"]) for r in responses] == [
        ("call-a", "screenshot"),
        ("call-b", "weather"),
        ("call-c", "recording"),
    ]
    assert [len(r.get("parts", [])) for r in responses] == [1, 0, 1]
    assert last["role"] == "user"


def test_10_thought_signatures_are_kept_and_sent_back_on_the_same_part(
    stub: LoopbackStubServer,
) -> None:
    text_signature = b"\x01text-signature\xff"
    call_signature = b"\x02call-signature\xfe"
    stub.script(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "text": "Let me look.",
                                "thoughtSignature": base64.b64encode(text_signature).decode(),
                            },
                            {
                                "functionCall": {"id": "call-1", "name": "screenshot", "args": {}},
                                "thoughtSignature": base64.b64encode(call_signature).decode(),
                            },
                            {"functionCall": {"id": "call-2", "name": "weather", "args": {}}},
                        ],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    )
    gemini = model(stub)
    reply = gemini.chat([ChatMessage.user("look")]).message
    assert reply.parts[0].metadata == {"thought_signature": text_signature}
    assert reply.tool_calls[0].metadata == {"thought_signature": call_signature}
    assert reply.tool_calls[1].metadata == {}
    # The assistant message goes through keyed state as JSON: the bytes must survive it.
    stored = ChatMessage.model_validate_json(reply.model_dump_json())
    results = [
        ChatMessage.tool_result("call-1", "screenshot", "done"),
        ChatMessage.tool_result("call-2", "weather", "sunny"),
    ]
    stub.script(OK)
    gemini.chat([ChatMessage.user("look"), stored, *results])
    model_turn = snake(stub.requests[-1].json)["contents"][1]
    assert model_turn["role"] == "model"
    signatures = [p.get("thought_signature") for p in model_turn["parts"]]
    assert wire_bytes(signatures[0]) == text_signature
    assert model_turn["parts"][0]["text"] == "Let me look."
    assert wire_bytes(signatures[1]) == call_signature
    assert model_turn["parts"][1]["function_call"]["id"] == "call-1"
    assert signatures[2] is None


def test_11_legacy_tool_media_sends_media_as_sibling_parts_after_the_function_response(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result(
        "call-1",
        "screenshot",
        [
            TextPart(text="home"),
            ImagePart(mime_type="image/png", data=PNG),
            DocumentPart(mime_type="application/pdf", url="https://example.com/a.pdf"),
        ],
    )
    default = last_turn(sent(stub, turn(result)))
    assert len(default["parts"]) == 1
    assert len(default["parts"][0]["function_response"]["parts"]) == 2

    legacy = last_turn(sent(stub, turn(result), legacy_tool_media=True))
    assert legacy["role"] == "user"
    response = legacy["parts"][0]["function_response"]
    assert response == {"id": "call-1", "name": "screenshot", "response": {"result": "home"}}
    assert legacy["parts"][1]["inline_data"]["mime_type"] == "image/png"
    assert blob_bytes(legacy["parts"][1]["inline_data"]) == PNG
    assert legacy["parts"][2] == {
        "file_data": {"file_uri": "https://example.com/a.pdf", "mime_type": "application/pdf"}
    }


def test_user_media_system_prompt_and_tools_on_the_wire(stub: LoopbackStubServer) -> None:
    messages = [
        ChatMessage.system("be brief"),
        ChatMessage.user(
            [TextPart(text="what is this?"), ImagePart(mime_type="image/png", data=PNG)]
        ),
    ]
    tool = ToolSpec(
        name="screenshot",
        description="Takes a screenshot.",
        parameters={"type": "object", "properties": {"page": {"type": "string"}}},
    )
    stub.script(OK)
    model(stub).chat(messages, [tool], temperature=0.2, max_tokens=64)
    body = snake(stub.requests[-1].json)
    assert stub.requests[-1].headers["x-goog-api-key"] == "test-key"
    assert body["system_instruction"]["parts"] == [{"text": "be brief"}]
    assert body["contents"][0]["parts"][0] == {"text": "what is this?"}
    assert blob_bytes(body["contents"][0]["parts"][1]["inline_data"]) == PNG
    declaration = body["tools"][0]["function_declarations"][0]
    assert declaration["name"] == "screenshot"
    assert declaration["parameters_json_schema"] == tool.parameters
    assert body["generation_config"] == {"temperature": 0.2, "max_output_tokens": 64}


def test_reply_becomes_a_chat_response_with_usage_finish_reason_and_model_version(
    stub: LoopbackStubServer,
) -> None:
    stub.script(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 11,
                "candidatesTokenCount": 5,
                "thoughtsTokenCount": 7,
                "cachedContentTokenCount": 8,
            },
            "modelVersion": "gemini-3-pro-001",
        }
    )
    gemini = model(stub)
    response = gemini.chat([ChatMessage.user("weather in Oslo?")])
    assert response.finish_reason == "STOP"
    assert response.model_version == "gemini-3-pro-001"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 12)
    assert response.usage.cached_tokens == 8
    assert response.latency_ms > 0
    call = response.message.tool_calls[0]
    assert (call.name, call.arguments) == ("weather", {"city": "Oslo"})
    # Gemini gave no id: ours is made up and never sent back.
    result = ChatMessage.tool_result(call.id, "weather", "cold")
    stub.script(OK)
    gemini.chat([ChatMessage.user("weather in Oslo?"), response.message, result])
    body = snake(stub.requests[-1].json)
    assert "id" not in body["contents"][1]["parts"][0]["function_call"]
    assert "id" not in body["contents"][2]["parts"][0]["function_response"]


def test_media_in_a_reply_become_parts_of_the_assistant_message(
    stub: LoopbackStubServer,
) -> None:
    stub.script(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "Here it is."},
                            {
                                "inlineData": {
                                    "mimeType": "image/png",
                                    "data": base64.b64encode(PNG).decode(),
                                }
                            },
                            {"text": "thinking...", "thought": True},
                        ],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    )
    message = model(stub).chat([ChatMessage.user("draw a square")]).message
    assert message.content == "Here it is."
    assert message.media == [ImagePart(mime_type="image/png", data=PNG)]


def test_a_store_ref_without_a_media_store_fails_before_sending(stub: LoopbackStubServer) -> None:
    ref = MediaRef(sha256="ab" * 32, mime_type="image/png", size_bytes=3)
    result = ChatMessage.tool_result(
        "call-1", "screenshot", [ImagePart(mime_type="image/png", ref=ref)]
    )
    with pytest.raises(InvalidContent, match="no media_store to resolve it"):
        model(stub).chat(turn(result))
    assert stub.requests == []


def test_vertex_ai_and_api_version_choose_the_endpoint(stub: LoopbackStubServer) -> None:
    stub.script(OK, OK)
    model(stub, vertexai=True).chat([ChatMessage.user("hi")])
    model(stub, api_version="v1beta").chat([ChatMessage.user("hi")])
    paths = [r.path for r in stub.requests]
    assert paths == [
        "/v1beta1/publishers/google/models/gemini-3-pro:generateContent",
        "/v1beta/models/gemini-3-pro:generateContent",
    ]
    assert stub.requests[0].headers["x-goog-api-key"] == "test-key"
