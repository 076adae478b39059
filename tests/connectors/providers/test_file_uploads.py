"""Provider file uploads (`upload_media`) through the real SDKs against the loopback stub's
file-API double: one upload for many turns and keys, the reference on the wire instead of
base64, small media inline, expiry and a refused file uploaded again once, Chat
Completions' PDFs by file id and images inline, and a mapping shared with another process."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.media import MediaStore
from streamagents.connectors.provider_files import ProviderFileIndex
from streamagents.connectors.providers import BadRequest, ChatModel, create_model
from streamagents.connectors.providers.file_uploads import UploadMedia
from streamagents.serde.messages import ChatMessage, DocumentPart, ImagePart, TextPart, ToolCall
from streamagents.testing.files_double import GEMINI_FILE_URI, ProviderFilesDouble

GEMINI_OK = {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}
RESPONSES_OK = {
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    ]
}
CHAT_OK = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
}
BIG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 1200  # about 300 KB
SMALL = b"\x89PNG\r\n\x1a\n" + bytes(100)
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 600
MIN_BYTES = 100_000


def ok(request: RecordedRequest) -> dict[str, Any]:
    """The ok reply of whichever API the request is for."""
    if request.path.endswith(":generateContent"):
        return GEMINI_OK
    return RESPONSES_OK if request.path.endswith("/responses") else CHAT_OK


@pytest.fixture
def files() -> ProviderFilesDouble:
    return ProviderFilesDouble(ok)


@pytest.fixture
def server(files: ProviderFilesDouble) -> Iterator[LoopbackStubServer]:
    with LoopbackStubServer(files) as running:
        yield running


@pytest.fixture
def store(tmp_path: Path) -> MediaStore:
    return MediaStore(str(tmp_path / "media"))


def model(
    provider: str, server: LoopbackStubServer, store: MediaStore, **options: Any
) -> ChatModel:
    base_url = server.url if provider == "gemini" else server.url + "/v1"
    settings: dict[str, Any] = {"max_retries": 0, **options}
    return create_model(
        provider,
        "m",
        api_key="test-key",
        base_url=base_url,
        media_store=store,
        upload_media=UploadMedia(min_bytes=MIN_BYTES),
        **settings,
    )


def image_turn(store: MediaStore, data: bytes, question: str) -> list[ChatMessage]:
    """A user turn with a stored image, as the runtime keeps it in memory (by ref)."""
    part = ImagePart(mime_type="image/png", ref=store.put(data, "image/png"))
    return [ChatMessage(role="user", parts=[TextPart(text=question), part])]


def model_calls(server: LoopbackStubServer) -> list[RecordedRequest]:
    return [r for r in server.requests if "files" not in r.path]


async def turns(chat: ChatModel, conversations: list[list[ChatMessage]]) -> None:
    try:
        for messages in conversations:
            await chat.achat(messages)
    finally:
        await chat.aclose()


def test_gemini_uploads_once_for_many_turns_and_keys_and_sends_the_file_uri(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    history = image_turn(store, BIG, "what is on the screen?")
    conversations = [
        history,
        [
            *history,
            ChatMessage(role="assistant", content="a login form"),
            ChatMessage.user("and the colour?"),
        ],
        image_turn(store, BIG, "another key asks about the same screenshot"),
    ]
    asyncio.run(turns(model("gemini", server, store), conversations))
    assert [(u.name, u.mime_type, u.data) for u in files.uploads] == [
        ("files/stub-1", "image/png", BIG)
    ]
    start = next(r for r in server.requests if r.headers.get("x-goog-upload-command") == "start")
    assert start.headers["x-goog-upload-protocol"] == "resumable"
    assert start.headers["x-goog-upload-header-content-length"] == str(len(BIG))
    calls = model_calls(server)
    assert len(calls) == 3
    for call in calls:
        part = call.json["contents"][0]["parts"][1]
        data = part.get("fileData") or part.get("file_data")
        assert data in (
            {"fileUri": GEMINI_FILE_URI + "files/stub-1", "mimeType": "image/png"},
            {"file_uri": GEMINI_FILE_URI + "files/stub-1", "mime_type": "image/png"},
        )
        assert len(call.body) < 2000  # the 300 KB image is not in it
        assert base64.b64encode(BIG[:3000]).decode()[:100] not in call.body.decode()


def test_media_below_min_bytes_stay_inline(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    asyncio.run(turns(model("gemini", server, store), [image_turn(store, SMALL, "tiny")]))
    assert files.uploads == []
    part = model_calls(server)[0].json["contents"][0]["parts"][1]
    blob = part.get("inlineData") or part.get("inline_data")
    assert base64.urlsafe_b64decode(blob["data"]) == SMALL


def test_gemini_waits_until_the_uploaded_file_is_active(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    files.processing_gets = 2
    asyncio.run(turns(model("gemini", server, store), [image_turn(store, BIG, "video?")]))
    gets = [r for r in server.requests if r.method == "GET"]
    assert [r.path.split("/", 2)[2] for r in gets] == ["files/stub-1"] * 3
    assert server.requests.index(gets[-1]) < server.requests.index(model_calls(server)[0])


def test_a_file_near_its_expiry_is_uploaded_again_and_the_mapping_replaced(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore, tmp_path: Path
) -> None:
    files.expires_in_s = 60.0  # inside the margin: never referred to
    chat = model("gemini", server, store)
    asyncio.run(turns(chat, [image_turn(store, BIG, "one"), image_turn(store, BIG, "two")]))
    assert [u.name for u in files.uploads] == ["files/stub-1", "files/stub-2"]
    sent = [json.dumps(r.json) for r in model_calls(server)]
    assert "files/stub-1" in sent[0] and "files/stub-2" in sent[1]
    index = ProviderFileIndex(store.root, f"gemini-files {server.url}")
    recorded = index.get(store.put(BIG, "image/png").sha256)
    assert recorded is not None and recorded.name == "files/stub-2"


def test_a_refused_file_is_uploaded_again_once_and_the_call_retried(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    chat = model("gemini", server, store)

    async def scenario() -> None:
        await chat.achat(image_turn(store, BIG, "one"))
        files.delete("files/stub-1")  # deleted at the provider (or expired early)
        answer = await chat.achat(image_turn(store, BIG, "two"))
        assert answer.message.content == "ok"
        await chat.aclose()

    asyncio.run(scenario())
    assert files.refused == ["files/stub-1"]
    assert [u.name for u in files.uploads] == ["files/stub-1", "files/stub-2"]
    assert "files/stub-2" in json.dumps(model_calls(server)[-1].json)


def test_openai_expires_at_is_honoured_a_file_near_its_expiry_is_uploaded_again(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    files.expires_in_s = 60.0  # the Files API's expires_at, inside the margin
    chat = model("openai-responses", server, store)
    asyncio.run(turns(chat, [image_turn(store, BIG, "one"), image_turn(store, BIG, "two")]))
    assert [u.name for u in files.uploads] == ["file-stub1", "file-stub2"]
    sent = [r.json["input"][0]["content"][1]["file_id"] for r in model_calls(server)]
    assert sent == ["file-stub1", "file-stub2"]
    assert files.refused == []


@pytest.mark.parametrize(
    ("provider", "refusal"),
    [("gemini", 403), ("gemini", 404), ("openai-responses", 404)],
)
def test_a_file_refused_as_expired_is_uploaded_again_once_and_the_call_retried(
    server: LoopbackStubServer,
    files: ProviderFilesDouble,
    store: MediaStore,
    provider: str,
    refusal: int,
) -> None:
    files.gemini_refusal = refusal
    chat = model(provider, server, store)
    first = "files/stub-1" if provider == "gemini" else "file-stub1"
    second = "files/stub-2" if provider == "gemini" else "file-stub2"

    async def scenario() -> None:
        await chat.achat(image_turn(store, BIG, "one"))
        files.expire(first)  # held, but past its expiry sooner than announced
        answer = await chat.achat(image_turn(store, BIG, "two"))
        assert answer.message.content == "ok"
        await chat.aclose()

    asyncio.run(scenario())
    assert files.refused == [first]
    assert [u.name for u in files.uploads] == [first, second]
    refused, retried = model_calls(server)[-2:]
    assert first in refused.body.decode() and second not in refused.body.decode()
    assert second in retried.body.decode() and first not in retried.body.decode()


def test_a_second_refusal_fails_the_call_as_a_provider_error_without_bytes_or_key(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    files.refuse_all = True  # say, the key lost access to the project's files
    chat = model("gemini", server, store)
    with pytest.raises(BadRequest) as caught:
        chat.chat(image_turn(store, BIG, "one"))
    assert caught.value.status == 403
    assert len(files.uploads) == 2 and len(files.refused) == 2
    assert "test-key" not in str(caught.value)


def test_responses_sends_uploaded_images_and_pdfs_by_file_id(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    pdf = DocumentPart(mime_type="application/pdf", ref=store.put(PDF, "application/pdf"))
    turn = image_turn(store, BIG, "compare")
    turn[0] = turn[0].model_copy(update={"parts": [*turn[0].parts, pdf]})
    asyncio.run(turns(model("openai-responses", server, store), [turn, turn]))
    uploaded = {u.data: (u.purpose, u.name) for u in files.uploads}  # uploaded concurrently
    assert len(files.uploads) == 2
    assert (uploaded[BIG][0], uploaded[PDF][0]) == ("vision", "user_data")
    for call in model_calls(server):
        content = call.json["input"][0]["content"]
        assert content[1:] == [
            {"type": "input_image", "file_id": uploaded[BIG][1], "detail": "auto"},
            {"type": "input_file", "file_id": uploaded[PDF][1]},
        ]


def tool_turn(store: MediaStore, data: bytes) -> list[ChatMessage]:
    """A call of a camera tool whose result holds a stored image, as the runtime keeps it."""
    call = ToolCall(id="call-1", name="camera", arguments={"name": "north"})
    image = ImagePart(mime_type="image/png", ref=store.put(data, "image/png"))
    return [
        ChatMessage.user("what does north see?"),
        ChatMessage(role="assistant", tool_calls=[call]),
        ChatMessage(
            role="tool",
            tool_call_id="call-1",
            name="camera",
            parts=[TextPart(text="picture from north"), image],
        ),
    ]


@pytest.mark.parametrize("provider", ["gemini", "openai-responses"])
def test_an_uploaded_image_in_a_tool_result_is_sent_by_reference_inside_the_result(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore, provider: str
) -> None:
    asyncio.run(turns(model(provider, server, store), [tool_turn(store, BIG)]))
    [uploaded] = files.uploads
    assert uploaded.data == BIG
    [call] = model_calls(server)
    assert len(call.body) < 3000  # the 300 KB image is not in it
    if provider == "gemini":
        response = call.json["contents"][2]["parts"][0]
        response = response.get("functionResponse") or response["function_response"]
        [part] = response["parts"]
        data = part.get("fileData") or part.get("file_data")
        assert data in (
            {"fileUri": GEMINI_FILE_URI + uploaded.name, "mimeType": "image/png"},
            {"file_uri": GEMINI_FILE_URI + uploaded.name, "mime_type": "image/png"},
        )
    else:
        [output] = [i for i in call.json["input"] if i.get("type") == "function_call_output"]
        assert output["call_id"] == "call-1"
        assert output["output"] == [
            {"type": "input_text", "text": "picture from north"},
            {"type": "input_image", "file_id": uploaded.name, "detail": "auto"},
        ]


def test_chat_completions_sends_pdfs_by_file_id_and_images_inline(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    pdf = DocumentPart(mime_type="application/pdf", ref=store.put(PDF, "application/pdf"))
    turn = image_turn(store, BIG, "compare")
    turn[0] = turn[0].model_copy(update={"parts": [*turn[0].parts, pdf]})
    asyncio.run(turns(model("openai", server, store), [turn]))
    assert [(u.purpose, u.data) for u in files.uploads] == [("user_data", PDF)]
    content = model_calls(server)[0].json["messages"][0]["content"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert content[2] == {"type": "file", "file": {"file_id": "file-stub1"}}


def test_openai_refused_file_id_is_uploaded_again_once(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    chat = model("openai-responses", server, store)

    async def scenario() -> None:
        await chat.achat(image_turn(store, BIG, "one"))
        files.delete("file-stub1")
        await chat.achat(image_turn(store, BIG, "two"))
        await chat.aclose()

    asyncio.run(scenario())
    assert files.refused == ["file-stub1"]
    assert [u.name for u in files.uploads] == ["file-stub1", "file-stub2"]


def test_a_mapping_written_by_one_process_is_used_by_another(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    """The SDK worker process uploads; a model of this process (a restarted job) reuses it."""
    worker = model("gemini", server, store, sdk_process=True)
    asyncio.run(turns(worker, [image_turn(store, BIG, "first")]))
    asyncio.run(turns(model("gemini", server, store), [image_turn(store, BIG, "after a restart")]))
    assert len(files.uploads) == 1
    assert all("files/stub-1" in json.dumps(r.json) for r in model_calls(server))


def test_concurrent_calls_of_one_process_wait_for_one_upload(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    chat = model("openai-responses", server, store)

    async def keys() -> None:
        await asyncio.gather(*(chat.achat(image_turn(store, BIG, f"key {n}")) for n in range(6)))
        await chat.aclose()

    asyncio.run(keys())
    assert len(files.uploads) == 1 and len(model_calls(server)) == 6


def test_subtasks_uploading_the_same_bytes_at_once_end_with_one_mapping_all_reuse(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    """Three models (as three subtasks, each with its own memory) race on the same image; the
    index then holds one of their files, whole, and a fourth model uploads nothing."""
    subtasks = [model("gemini", server, store) for _ in range(3)]

    async def race() -> None:
        await asyncio.gather(*(turns(m, [image_turn(store, BIG, "same")]) for m in subtasks))

    asyncio.run(race())
    uploaded = {u.name for u in files.uploads}
    recorded = ProviderFileIndex(store.root, f"gemini-files {server.url}").get(
        store.put(BIG, "image/png").sha256
    )
    assert recorded is not None and recorded.name in uploaded
    assert recorded.reference == GEMINI_FILE_URI + recorded.name
    before = len(files.uploads)
    asyncio.run(turns(model("gemini", server, store), [image_turn(store, BIG, "later")]))
    assert len(files.uploads) == before
    assert recorded.name in json.dumps(model_calls(server)[-1].json)


def test_a_failed_upload_is_retried_by_the_models_retry_policy(
    server: LoopbackStubServer, files: ProviderFilesDouble, store: MediaStore
) -> None:
    server.script(StubReply({"error": {"message": "try again"}}, status=503))
    chat = model("openai-responses", server, store, max_retries=1, retry={"initial_delay_s": 0.01})
    answer = chat.chat(image_turn(store, BIG, "one"))
    assert answer.message.content == "ok"
    posts = [r for r in server.requests if r.path == "/v1/files"]
    assert len(posts) == 2 and len(files.uploads) == 1
