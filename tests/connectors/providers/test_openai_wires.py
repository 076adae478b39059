"""OpenAI wire behaviour 12 (Responses) and 13 (Chat Completions), on the JSON `openai` sent."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from provider_wire import MP3, PDF, PNG, WAV, turn

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import (
    OpenAIChatModel,
    OpenAIResponsesModel,
    UnsupportedContent,
    create_model,
)
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import (
    AudioPart,
    ChatMessage,
    DocumentPart,
    ImagePart,
    TextPart,
    VideoPart,
)

CHAT_OK = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
}
RESPONSES_OK = {
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    ],
}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chat_model(stub: LoopbackStubServer, **options: Any) -> OpenAIChatModel:
    model = create_model(
        "openai", "gpt-test", api_key="test-key", base_url=f"{stub.url}/v1", **options
    )
    assert isinstance(model, OpenAIChatModel)
    return model


def responses_model(stub: LoopbackStubServer, **options: Any) -> OpenAIResponsesModel:
    model = create_model(
        "openai-responses", "gpt-test", api_key="test-key", base_url=f"{stub.url}/v1", **options
    )
    assert isinstance(model, OpenAIResponsesModel)
    return model


def sent_responses(stub: LoopbackStubServer, messages: list[ChatMessage]) -> dict[str, Any]:
    stub.script(RESPONSES_OK)
    responses_model(stub).chat(messages)
    assert stub.requests[-1].path == "/v1/responses"
    return stub.requests[-1].json


def sent_chat(stub: LoopbackStubServer, messages: list[ChatMessage]) -> dict[str, Any]:
    stub.script(CHAT_OK)
    chat_model(stub).chat(messages)
    assert stub.requests[-1].path == "/v1/chat/completions"
    return stub.requests[-1].json


def test_12_function_call_output_with_media_is_a_list_in_part_order(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result(
        "call_1",
        "report",
        [
            TextPart(text="the chart:"),
            ImagePart(mime_type="image/png", data=PNG),
            ImagePart(mime_type="image/jpeg", url="https://example.com/photo.jpg"),
            DocumentPart(mime_type="application/pdf", data=PDF, metadata={"filename": "q3.pdf"}),
            DocumentPart(mime_type="application/pdf", url="https://example.com/annual.pdf"),
            TextPart(text="end"),
        ],
    )
    item = sent_responses(stub, turn(result))["input"][-1]
    assert item["type"] == "function_call_output"
    assert item["call_id"] == "call_1"
    assert item["output"] == [
        {"type": "input_text", "text": "the chart:"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(PNG)}", "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/photo.jpg", "detail": "auto"},
        {
            "type": "input_file",
            "filename": "q3.pdf",
            "file_data": f"data:application/pdf;base64,{b64(PDF)}",
        },
        {"type": "input_file", "file_url": "https://example.com/annual.pdf"},
        {"type": "input_text", "text": "end"},
    ]


def test_12_text_only_function_call_output_stays_a_plain_string(
    stub: LoopbackStubServer,
) -> None:
    result = ChatMessage.tool_result("call_1", "weather", "sunny", is_error=True)
    item = sent_responses(stub, turn(result))["input"][-1]
    assert item == {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}


@pytest.mark.parametrize(
    "part",
    [
        AudioPart(mime_type="audio/wav", data=WAV),
        VideoPart(mime_type="video/mp4", url="https://example.com/clip.mp4"),
    ],
    ids=["audio", "video"],
)
def test_12_audio_or_video_in_a_tool_result_raises_naming_the_part_kind(
    stub: LoopbackStubServer, part: AudioPart | VideoPart
) -> None:
    result = ChatMessage.tool_result("call_1", "record", [TextPart(text="here"), part])
    with pytest.raises(UnsupportedContent) as raised:
        responses_model(stub).chat(turn(result))
    assert f"no input item for {part.kind}" in str(raised.value)
    assert "call_1" in str(raised.value)
    assert stub.requests == []


def test_13_tool_messages_carry_text_and_the_media_follow_in_one_user_message(
    stub: LoopbackStubServer,
) -> None:
    with_text = ChatMessage.tool_result(
        "call_a",
        "screenshot",
        [
            TextPart(text="the page"),
            ImagePart(mime_type="image/png", data=PNG),
            DocumentPart(mime_type="application/pdf", data=PDF),
        ],
    )
    text_only = ChatMessage.tool_result("call_b", "weather", "sunny")
    media_only = ChatMessage.tool_result(
        "call_c", "recording", [AudioPart(mime_type="audio/mpeg", data=MP3)]
    )
    messages = sent_chat(stub, turn(with_text, text_only, media_only))["messages"]
    assert messages[2:5] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "the page"},
        {"role": "tool", "tool_call_id": "call_b", "content": "sunny"},
        {
            "role": "tool",
            "tool_call_id": "call_c",
            "content": "[1 attachment(s): audio/mpeg; sent in the next user message]",
        },
    ]
    assert len(messages) == 6
    assert messages[5] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Attachment 1 of 2 from tool call call_a (screenshot):"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
            {"type": "text", "text": "Attachment 2 of 2 from tool call call_a (screenshot):"},
            {
                "type": "file",
                "file": {
                    "filename": "document.pdf",
                    "file_data": f"data:application/pdf;base64,{b64(PDF)}",
                },
            },
            {"type": "text", "text": "Attachment 1 of 1 from tool call call_c (recording):"},
            {"type": "input_audio", "input_audio": {"data": b64(MP3), "format": "mp3"}},
        ],
    }


@pytest.mark.parametrize(
    ("part", "rule"),
    [
        (VideoPart(mime_type="video/mp4", data=b"\x00" * 16), "no content part for video"),
        (DocumentPart(mime_type="text/csv", data=b"a,b\n"), "PDF documents only, not text/csv"),
        (
            DocumentPart(mime_type="application/pdf", url="https://example.com/a.pdf"),
            "PDF documents inline only",
        ),
        (AudioPart(mime_type="audio/ogg", data=b"OggS"), "wav or mp3 only, not audio/ogg"),
    ],
    ids=["video", "csv", "pdf-url", "ogg"],
)
def test_13_media_chat_completions_cannot_take_raise_a_clear_error(
    stub: LoopbackStubServer, part: Any, rule: str
) -> None:
    result = ChatMessage.tool_result("call_1", "fetch", [part])
    with pytest.raises(UnsupportedContent) as raised:
        chat_model(stub).chat(turn(result))
    assert rule in str(raised.value)
    assert "call_1" in str(raised.value)
    assert stub.requests == []


def test_chat_completions_user_media_tools_and_tool_call_round_trip(
    stub: LoopbackStubServer,
) -> None:
    stub.script(
        {
            "model": "gpt-test-2026",
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_9",
                                "type": "function",
                                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 21,
                "completion_tokens": 4,
                "prompt_tokens_details": {"cached_tokens": 16},
            },
        }
    )
    model = chat_model(stub)
    user = ChatMessage.user(
        [
            TextPart(text="what is this?"),
            ImagePart(mime_type="image/png", url="https://example.com/a.png"),
            AudioPart(mime_type="audio/wav", data=WAV),
            DocumentPart(mime_type="application/pdf", data=PDF),
        ]
    )
    tool = ToolSpec(name="weather", description="Weather now.", parameters={"type": "object"})
    response = model.chat([ChatMessage.system("be brief"), user], [tool], max_tokens=50)
    body = stub.requests[-1].json
    assert stub.requests[-1].headers["authorization"] == "Bearer test-key"
    assert body["model"] == "gpt-test"
    assert body["max_completion_tokens"] == 50
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather now.",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
        {
            "type": "file",
            "file": {
                "filename": "document.pdf",
                "file_data": f"data:application/pdf;base64,{b64(PDF)}",
            },
        },
    ]
    assert response.finish_reason == "tool_calls"
    assert response.model_version == "gpt-test-2026"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 4)
    assert response.usage.cached_tokens == 16
    call = response.message.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_9", "weather", {"city": "Oslo"})

    stub.script(CHAT_OK)
    model.chat([user, response.message, ChatMessage.tool_result("call_9", "weather", "cold")])
    assistant, tool_message = stub.requests[-1].json["messages"][1:3]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "weather", "arguments": json.dumps({"city": "Oslo"})},
            }
        ],
    }
    assert tool_message == {"role": "tool", "tool_call_id": "call_9", "content": "cold"}


def test_responses_user_media_instructions_tools_and_tool_call_round_trip(
    stub: LoopbackStubServer,
) -> None:
    stub.script(
        {
            "model": "gpt-test-2026",
            "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_9",
                    "name": "weather",
                    "arguments": '{"city": "Oslo"}',
                },
            ],
            "usage": {
                "input_tokens": 30,
                "output_tokens": 6,
                "input_tokens_details": {"cached_tokens": 24},
            },
        }
    )
    model = responses_model(stub)
    user = ChatMessage.user(
        [
            TextPart(text="summarise"),
            ImagePart(mime_type="image/png", data=PNG),
            DocumentPart(mime_type="text/plain", url="https://example.com/notes.txt"),
        ]
    )
    tool = ToolSpec(name="weather", description="Weather now.", parameters={"type": "object"})
    response = model.chat([ChatMessage.system("be brief"), user], [tool], max_tokens=50)
    body = stub.requests[-1].json
    assert body["instructions"] == "be brief"
    assert body["max_output_tokens"] == 50
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Weather now.",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "summarise"},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{b64(PNG)}",
                    "detail": "auto",
                },
                {"type": "input_file", "file_url": "https://example.com/notes.txt"},
            ],
        }
    ]
    assert response.finish_reason == "completed"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 6)
    assert response.usage.cached_tokens == 24
    call = response.message.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_9", "weather", {"city": "Oslo"})

    stub.script(RESPONSES_OK)
    model.chat([user, response.message, ChatMessage.tool_result("call_9", "weather", "cold")])
    assert stub.requests[-1].json["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_9",
            "name": "weather",
            "arguments": json.dumps({"city": "Oslo"}),
        },
        {"type": "function_call_output", "call_id": "call_9", "output": "cold"},
    ]


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
def test_media_in_an_assistant_message_fails_naming_the_rule(
    stub: LoopbackStubServer, provider: str
) -> None:
    url = "https://example.com/private.png"
    assistant = ChatMessage(role="assistant", parts=[ImagePart(mime_type="image/png", url=url)])
    model = create_model(provider, "gpt-test", api_key="k", base_url=f"{stub.url}/v1")
    with pytest.raises(UnsupportedContent) as raised:
        model.chat([ChatMessage.user("draw"), assistant])
    assert "only user messages and tool results carry media" in str(raised.value)
    assert url not in str(raised.value)
    assert stub.requests == []
