"""The SDK worker process: a model wrapped in `SdkProcessModel` sends what it sends
in-process (media refs resolved from the store by the worker), answers the same, raises
the same errors with the same facts, survives its worker's death, and leaves no worker
behind when it is closed or its caller's process dies."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import (
    BadRequest,
    ChatModel,
    ConnectionFailed,
    RateLimited,
    RateLimits,
    RetryPolicy,
    create_model,
    sdk_process,
)
from streamagents.connectors.providers.gemini import GeminiChatModel
from streamagents.connectors.providers.sdk_process import SdkProcessModel, wants_worker
from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.message_json import MessageJson
from streamagents.serde.messages import ChatMessage, ToolCall
from tests.support.provider_wire import PNG

GEMINI_TOOL_CALL = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"functionCall": {"id": "fc1", "name": "lookup", "args": {"q": "O-1"}}}],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3},
}
CHAT_OK = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
}
RESPONSES_OK = {
    "id": "resp_1",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    ],
}
REPLIES = {"gemini": GEMINI_TOOL_CALL, "openai": CHAT_OK, "openai-responses": RESPONSES_OK}
TOOLS = [
    ToolSpec(
        name="lookup",
        description="Look an order up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
]


def base_url(stub: LoopbackStubServer, wire: str) -> str:
    return stub.url if wire == "gemini" else f"{stub.url}/v1"


def conversation(store: MediaStore) -> list[ChatMessage]:
    """System, a user turn with text and a stored image, a tool call and its result."""
    image = {"mime_type": "image/png", "ref": store.put(PNG, "image/png")}
    return [
        ChatMessage.system("be brief"),
        ChatMessage.user([{"kind": "text", "text": "what?"}, {"kind": "image", **image}]),
        ChatMessage(
            role="assistant", tool_calls=[ToolCall(id="c1", name="lookup", arguments={"q": "1"})]
        ),
        ChatMessage.tool_result("c1", "lookup", '{"status": "shipped"}'),
        ChatMessage.user("and now?"),
    ]


def call(model: ChatModel, messages: list[ChatMessage], **options: Any) -> ChatResponse:
    return model.chat(messages, TOOLS, **options)


@pytest.mark.parametrize("wire", sorted(REPLIES))
def test_the_worker_sends_and_answers_what_the_model_does_in_process(
    stub: LoopbackStubServer, tmp_path: Path, wire: str
) -> None:
    store = MediaStore(str(tmp_path / "media"))
    model = create_model(wire, "m", api_key="k", base_url=base_url(stub, wire), media_store=store)
    messages = conversation(store)
    stub.script(REPLIES[wire], REPLIES[wire])
    inline = call(model, messages, temperature=0.2)
    worker = call(SdkProcessModel(model), messages, temperature=0.2)
    first, second = stub.requests
    assert (second.path, second.json) == (first.path, first.json)
    # the worker read the stored image and sent it inline
    sent = second.body.decode()
    assert (
        base64.b64encode(PNG).decode()[:40] in sent
        or base64.urlsafe_b64encode(PNG).decode()[:40] in sent
    )
    ignore = {"latency_ms"}
    assert worker.model_dump(exclude=ignore) == inline.model_dump(exclude=ignore)
    assert worker.latency_ms > 0


def test_provider_errors_come_back_as_the_same_class_with_the_same_facts(
    stub: LoopbackStubServer,
) -> None:
    retry = RetryPolicy(initial_delay_s=0.01)
    off = RateLimits(adaptive=False)  # admission off: the second 429 is final
    model = create_model(
        "gemini", "m", api_key="k", base_url=stub.url, max_retries=1, retry=retry, limits=off
    )
    error = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "slow down"}}
    refused = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "no such field"}}
    raised: list[Exception] = []
    for wrapped in (model, SdkProcessModel(model)):
        stub.script(StubReply(error, status=429), StubReply(error, status=429))
        with pytest.raises(RateLimited) as limited:
            call(wrapped, [ChatMessage.user("hi")])
        stub.script(StubReply(refused, status=400))
        with pytest.raises(BadRequest) as bad:
            call(wrapped, [ChatMessage.user("hi")])
        raised += [limited.value, bad.value]
    for inline, worker in zip(raised[:2], raised[2:], strict=True):
        assert type(worker) is type(inline)
        assert str(worker) == str(inline)
        facts = ("provider", "status", "code", "attempts")
        assert [getattr(worker, f) for f in facts] == [getattr(inline, f) for f in facts]
        assert [r.error_type for r in worker.retries] == [r.error_type for r in inline.retries]
    assert raised[2].attempts == 2


def test_an_error_raised_before_sending_keeps_its_class_name_and_message(
    stub: LoopbackStubServer,
) -> None:
    """Chat Completions refuses media in an assistant message before anything is sent."""
    model = create_model("openai", "m", api_key="k", base_url=f"{stub.url}/v1")
    image = ChatMessage(
        role="assistant",
        parts=[{"kind": "image", "mime_type": "image/png", "url": "http://x/a.png"}],
    )
    errors = []
    for wrapped in (model, SdkProcessModel(model)):
        with pytest.raises(Exception) as raised:
            call(wrapped, [ChatMessage.user("hi"), image])
        errors.append(raised.value)
    assert type(errors[1]).__name__ == type(errors[0]).__name__
    assert str(errors[1]) == str(errors[0])
    assert stub.requests == []


def worker_pid(model: SdkProcessModel) -> int:
    assert model._worker is not None
    return model._worker.process.pid


def test_a_call_whose_worker_dies_is_sent_again_to_a_new_one(stub: LoopbackStubServer) -> None:
    model = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url=stub.url))
    stub.script(StubReply(GEMINI_TOOL_CALL, delay_s=3.0), GEMINI_TOOL_CALL)

    async def scenario() -> tuple[ChatResponse, int, int]:
        try:
            answer = asyncio.ensure_future(model.achat([ChatMessage.user("hi")]))
            while not stub.requests:
                await asyncio.sleep(0.02)
            first = worker_pid(model)
            os.kill(first, signal.SIGKILL)
            response = await answer
            return response, first, worker_pid(model)
        finally:
            await model.aclose()

    response, first, second = asyncio.run(scenario())
    assert response.message.tool_calls[0].name == "lookup"
    assert first != second
    assert len(stub.requests) == 2


def test_a_call_whose_second_worker_dies_too_fails_as_a_connection_failure(
    stub: LoopbackStubServer,
) -> None:
    model = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url=stub.url))
    stub.script(*[StubReply(GEMINI_TOOL_CALL, delay_s=3.0)] * 2)

    async def scenario() -> None:
        try:
            answer = asyncio.ensure_future(model.achat([ChatMessage.user("hi")]))
            for sent in (1, 2):
                while len(stub.requests) < sent:
                    await asyncio.sleep(0.02)
                os.kill(worker_pid(model), signal.SIGKILL)
            await answer
        finally:
            await model.aclose()

    with pytest.raises(ConnectionFailed, match="SDK worker process exited"):
        asyncio.run(scenario())


def test_closing_the_model_ends_its_worker(stub: LoopbackStubServer) -> None:
    model = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url=stub.url))
    stub.script(GEMINI_TOOL_CALL)

    async def scenario() -> subprocess.Popen[bytes]:
        await model.achat([ChatMessage.user("hi")])
        assert model._worker is not None
        process = model._worker.process
        await model.aclose()
        return process

    assert asyncio.run(scenario()).returncode == 0


def test_a_worker_whose_caller_dies_exits(stub: LoopbackStubServer, tmp_path: Path) -> None:
    """The caller is killed with a call in flight: the worker sees its stdin end and exits."""
    stub.script(StubReply(GEMINI_TOOL_CALL, delay_s=30.0))
    pid_file = tmp_path / "worker.pid"
    caller = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from streamagents.connectors.providers import create_model
        from streamagents.connectors.providers.sdk_process import SdkProcessModel
        from streamagents.serde.messages import ChatMessage

        async def main():
            model = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url={stub.url!r}))
            call = asyncio.ensure_future(model.achat([ChatMessage.user("hi")]))
            while model._worker is None:
                await asyncio.sleep(0.01)
            open({str(pid_file)!r}, "w").write(str(model._worker.process.pid))
            await asyncio.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    subprocess.run([sys.executable, "-c", caller], check=False, timeout=60)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # a loaded machine imports slowly
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
            break  # exited, waiting for init to reap it
        time.sleep(0.05)
    alive = (
        Path(f"/proc/{pid}").exists()
        and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    )
    assert not alive


def test_a_prepared_worker_takes_the_first_call(stub: LoopbackStubServer) -> None:
    """`prepare` starts the worker before any call (an operator's `open`); the first call
    goes to that worker instead of starting another."""
    model = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url=stub.url))
    model.prepare()
    prepared = worker_pid(model)
    stub.script(GEMINI_TOOL_CALL)

    async def scenario() -> int:
        try:
            await model.achat([ChatMessage.user("hi")])
            return worker_pid(model)
        finally:
            await model.aclose()

    assert asyncio.run(scenario()) == prepared


def test_prepare_waits_for_a_kind_of_model_once_per_process(
    stub: LoopbackStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first `prepare` of a kind of model waits until its worker has loaded it; a later
    one (an operator restarted on a TaskManager that ran it) returns at once, so the task
    runs and checkpoints while the worker starts."""
    monkeypatch.setattr(sdk_process, "_loaded", set())  # as in a new TaskManager
    first = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url=stub.url))
    first.prepare()
    assert first._worker is not None and first._worker.ready
    again = SdkProcessModel(create_model("gemini", "m", api_key="k", base_url=stub.url))
    again.prepare()
    assert again._worker is not None and not again._worker.ready
    stub.script(GEMINI_TOOL_CALL)

    async def scenario() -> ChatResponse:
        try:
            return await again.achat([ChatMessage.user("hi")])
        finally:
            await again.aclose()
            await first.aclose()

    assert asyncio.run(scenario()).message.tool_calls[0].name == "lookup"


@pytest.mark.parametrize(
    ("limits", "made_here"), [(None, True), (RateLimits(requests_per_minute=6000), False)]
)
def test_calls_while_a_restarted_worker_loads_are_made_in_this_process(
    stub: LoopbackStubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    limits: RateLimits | None,
    made_here: bool,
) -> None:
    """A restarted operator's first calls do not wait for its worker: until the worker (here
    an interpreter that takes 4 s to start) has loaded the model, they are answered in this
    process; then the worker takes them. A model with configured limits, which one process's
    admission must keep, waits for its worker instead."""
    started = tmp_path / "started"
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 4\ntouch {started}\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    adapter = create_model("gemini", "m", api_key="k", base_url=stub.url, limits=limits)
    kind = (str(slow), f"{type(adapter).__module__}.{type(adapter).__qualname__}")
    monkeypatch.setattr(sdk_process, "_loaded", {kind})  # loaded before in this process
    model = SdkProcessModel(adapter, python=str(slow))
    model.prepare()
    stub.script(GEMINI_TOOL_CALL, GEMINI_TOOL_CALL)

    async def scenario() -> tuple[ChatResponse, bool, ChatResponse, int]:
        try:
            first = await model.achat([ChatMessage.user("hi")])
            before_the_worker_started = not started.exists()
            worker = model._worker
            assert worker is not None
            deadline = time.monotonic() + 60
            while not worker.ready and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            second = await model.achat([ChatMessage.user("hi")])
            return first, before_the_worker_started, second, worker._next_id
        finally:
            await model.aclose()

    first, before_the_worker_started, second, sent_to_worker = asyncio.run(scenario())
    assert first.message.tool_calls[0].name == "lookup"
    assert second.message.tool_calls[0].name == "lookup"
    assert before_the_worker_started is made_here
    assert sent_to_worker == (1 if made_here else 2)  # the calls the worker was sent
    assert len(stub.requests) == 2


def test_a_model_the_worker_cannot_load_fails_prepare_naming_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's class lives in a module only this process can import: `prepare` (the
    operator's `open`) raises the worker's error instead of leaving calls to fail later."""
    (tmp_path / "only_here.py").write_text(
        "from streamagents.connectors.providers import ChatModel\n"
        "class LocalModel(ChatModel):\n"
        "    async def achat(self, messages, tools=(), **options):\n"
        "        raise NotImplementedError\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from only_here import LocalModel  # type: ignore[import-not-found]

    model = SdkProcessModel(LocalModel())
    with pytest.raises(Exception, match="No module named 'only_here'") as raised:
        model.prepare()
    assert type(raised.value).__name__ == "ModuleNotFoundError"


@pytest.mark.parametrize(
    ("adapter_module", "not_imported"),
    [
        ("gemini._model", ["openai", "google.genai._interactions"]),
        ("openai._models", ["google.genai"]),
    ],
)
def test_a_worker_loading_one_adapter_imports_no_other_sdk(
    adapter_module: str, not_imported: list[str]
) -> None:
    # What unpickling an adapter in the worker imports: its module, with its packages.
    module = f"streamagents.connectors.providers.{adapter_module}"
    check = f"import sys, {module}; print([m for m in {not_imported!r} if m in sys.modules])"
    found = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=120
    )
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def test_create_model_wraps_the_adapter_in_a_worker_when_asked() -> None:
    kept = MessageJson()
    wrapped = create_model("gemini", "m", api_key="k", sdk_process=True, message_json=kept)
    assert isinstance(wrapped, SdkProcessModel) and wrapped.model.provider == "gemini"
    assert wrapped._json is kept  # the caller's message JSON cache, shared
    assert not isinstance(create_model("gemini", "m", api_key="k"), SdkProcessModel)
    unset = create_model("gemini", "m", api_key="k", sdk_process=None)
    assert isinstance(unset, SdkProcessModel) == wants_worker(None)


class ClientCountingGemini(GeminiChatModel):
    """The Gemini adapter, counting the SDK clients it builds."""

    clients_built = 0

    def _new_client(self) -> Any:
        self.clients_built += 1
        return super()._new_client()


@pytest.mark.parametrize(("limits", "warmed"), [(None, 1), (RateLimits(max_concurrent=4), 0)])
def test_warming_a_restarted_operator_s_model_builds_the_client_its_first_calls_use(
    stub: LoopbackStubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    limits: RateLimits | None,
    warmed: int,
) -> None:
    """While a restarted operator's worker loads, `warm()` (which the agent function starts
    in `open()`) builds the in-process client on the loop, and the first calls use it; a
    model whose calls wait for the worker (configured limits) builds none."""
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 20\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    adapter = ClientCountingGemini("m", api_key="k", base_url=stub.url, limits=limits)
    kind = (str(slow), f"{type(adapter).__module__}.{type(adapter).__qualname__}")
    monkeypatch.setattr(sdk_process, "_loaded", {kind})  # loaded before in this process
    monkeypatch.setattr(sdk_process, "_CLOSE_WAIT_S", 0.5)  # then killed, still starting
    model = SdkProcessModel(adapter, python=str(slow))
    model.prepare()
    stub.script(GEMINI_TOOL_CALL)

    async def scenario() -> tuple[int, int]:
        try:
            await model.warm()
            after_warm = adapter.clients_built
            if warmed:
                await model.achat([ChatMessage.user("hi")])
            return after_warm, adapter.clients_built
        finally:
            await model.aclose()

    assert asyncio.run(scenario()) == (warmed, warmed)


def test_closing_a_model_whose_worker_is_still_starting_returns(
    stub: LoopbackStubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted operator closed while its worker still starts (a job cancelled at once)
    kills the worker and returns, although a process the worker started (here the `sleep`
    of its interpreter's wrapper) still holds its output pipe open."""
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 20\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    adapter = create_model("gemini", "m", api_key="k", base_url=stub.url)
    kind = (str(slow), f"{type(adapter).__module__}.{type(adapter).__qualname__}")
    monkeypatch.setattr(sdk_process, "_loaded", {kind})  # loaded before in this process
    monkeypatch.setattr(sdk_process, "_CLOSE_WAIT_S", 0.5)
    model = SdkProcessModel(adapter, python=str(slow))
    model.prepare()
    stub.script(GEMINI_TOOL_CALL)

    async def scenario() -> str:
        await model.achat([ChatMessage.user("hi")])  # made here; the worker is attached
        worker = model._worker
        assert worker is not None
        await asyncio.wait_for(model.aclose(), timeout=15)  # not the sleep's 20 s
        return str(worker.exited)

    assert "exited with code -9" in asyncio.run(scenario())
