"""CPU per call of the Interactions wire: the SDK's typed `interactions.create` against
`async_request` with our own JSON body, and what stored continuation saves.

A loopback stub (test double) answers in its own process, so the figures are the client
process's CPU only (`time.process_time`), not the server's. Each row sends the same
conversation, once text only and once with a 100 KB image in the user message: the
question, a tool call and its text result.

- `sdk interactions.create`: the body from `to_request`, passed as keyword arguments to
  `client.aio.interactions.create` (typed parameters, its own request path); the reply is
  left as the SDK's typed `Interaction` (not even turned into our response);
- `adapter, whole conversation`: `GeminiInteractionsModel.achat` as shipped
  (`to_request`, `async_request`, `from_response`), every step sent;
- `adapter, continued`: the same call continuing a stored interaction: only the tool
  result is sent, the image stays on the server;
- `adapter, streamed`: the whole conversation with `stream=True` (the SDK's interactions
  client and the event assembler; the stub answers with six events).

Run: python benchmarks/bench_interactions_send.py [calls]
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sys
import time
from typing import Any

from google import genai
from google.genai import types

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.providers import create_model
from streamagents.connectors.providers.gemini.interactions_wire import to_request
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart, ToolCall

REPLY = {
    "id": "int-2",
    "status": "completed",
    "steps": [{"type": "model_output", "content": [{"type": "text", "text": "ok"}]}],
}
EVENTS = [
    {"event_type": "interaction.created", "interaction": {"id": "int-2", "status": "in_progress"}},
    {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
    {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "o"}},
    {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "k"}},
    {"event_type": "step.stop", "index": 0},
    {"event_type": "interaction.completed", "interaction": {"id": "int-2", "status": "completed"}},
]
STREAM = "".join(
    f"event: {e['event_type']}\ndata: {json.dumps({**e, 'event_id': f'e{i}'})}\n\n"
    for i, e in enumerate(EVENTS)
).encode()


def answer(request: RecordedRequest) -> StubReply:
    """The canned reply: the interaction, or its event stream when one was asked for."""
    if (request.json or {}).get("stream"):
        return StubReply(STREAM, headers={"Content-Type": "text/event-stream"})
    return StubReply(REPLY)


def serve(port_out: Any) -> None:
    """Run the stub in this (child) process until killed."""
    with LoopbackStubServer(answer) as stub:
        port_out.put(stub.url)
        while True:
            time.sleep(3600)


def conversation(image_bytes: int) -> list[ChatMessage]:
    """A question (with an image when image_bytes > 0), a tool call from stored
    interaction int-1, and its result."""
    question: list[Any] = [TextPart(text="what is on this page?")]
    if image_bytes:
        question.append(ImagePart(mime_type="image/png", data=b"\x89PNG" + bytes(image_bytes)))
    return [
        ChatMessage.system("be brief"),
        ChatMessage.user(question),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="c1", name="lookup")],
            metadata={"interaction_id": "int-1"},
        ),
        ChatMessage.tool_result("c1", "lookup", "a login form"),
    ]


async def cpu_ms_per_call(call: Any, calls: int) -> float:
    await call()  # warm up: client built, connection open
    started = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - started) / calls * 1000


async def measure(url: str, calls: int, image_bytes: int) -> dict[str, float]:
    messages = conversation(image_bytes)
    model = create_model("gemini-interactions", "bench", api_key="k", base_url=url)
    streaming = create_model("gemini-interactions", "bench", api_key="k", base_url=url, stream=True)
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=url, api_version="v1beta")
    )
    body = to_request(messages, model="bench", stored=True).body

    async def typed() -> None:
        await client.aio.interactions.create(**body)

    async def whole() -> None:
        await model.achat(messages)

    async def continued() -> None:
        await model.achat(messages, previous_interaction_id="int-1")

    async def streamed() -> None:
        await streaming.achat(messages)

    figures = {
        "sdk interactions.create": await cpu_ms_per_call(typed, calls),
        "adapter, whole conversation": await cpu_ms_per_call(whole, calls),
        "adapter, continued": await cpu_ms_per_call(continued, calls),
        "adapter, streamed": await cpu_ms_per_call(streamed, calls),
    }
    await model.aclose()
    await streaming.aclose()
    await client.aio.aclose()
    return figures


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    urls: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(urls,), daemon=True)
    server.start()
    try:
        url = urls.get(timeout=30)
        text = asyncio.run(measure(url, calls, 0))
        image = asyncio.run(measure(url, calls, 100_000))
    finally:
        server.kill()
    print("client CPU ms per call (ratio to the SDK's typed create)")
    print(f"{'path':30} {'text only':>16} {'100 KB image':>16}")
    for name in text:
        cells = [
            f"{f[name]:7.3f} ({f[name] / f['sdk interactions.create']:4.2f})" for f in (text, image)
        ]
        print(f"{name:30} {cells[0]:>16} {cells[1]:>16}")


if __name__ == "__main__":
    main()
