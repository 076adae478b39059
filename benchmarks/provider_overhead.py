"""Per-call overhead of each provider adapter, measured against the loopback stub.

Prints, per provider: time to build one request (pure `to_request`, for gemini with its
`body()`; text and with a 100 KB image), and end-to-end calls per second through the real
SDK to a stub that answers at once, sequentially and with 64 calls in flight on one event
loop. The stub (a Python threading HTTP server) is part of what is measured, so the
end-to-end figures are a floor on what the adapters allow, not a ceiling.

Run: python benchmarks/provider_overhead.py [calls]
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.connectors.providers import ChatModel, create_model
from streamagents.connectors.providers.gemini import interactions_wire
from streamagents.connectors.providers.gemini import wire as gemini_wire
from streamagents.connectors.providers.openai import chat_wire, responses_wire
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart, ToolCall

REPLIES: dict[str, dict[str, Any]] = {
    "gemini": {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]},
    "gemini-interactions": {
        "id": "int-1",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "ok"}]}],
    },
    "openai": {
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
    },
    "openai-responses": {
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ],
    },
}
BUILDERS: dict[str, Callable[..., Any]] = {
    # body(): the JSON-ready request, inline bytes base64-encoded as the other wires' are.
    "gemini": lambda messages: gemini_wire.to_request(messages).body(),
    "gemini-interactions": lambda messages: interactions_wire.to_request(messages, model="bench"),
    "openai": chat_wire.to_request,
    "openai-responses": responses_wire.to_request,
}
PREFIX = {"gemini": "", "gemini-interactions": "", "openai": "/v1", "openai-responses": "/v1"}


def conversation(image_bytes: int) -> list[ChatMessage]:
    """A user question, a tool call and its result (with an image when image_bytes > 0)."""
    result_parts: list[Any] = [TextPart(text="the page")]
    if image_bytes:
        result_parts.append(ImagePart(mime_type="image/png", data=b"\x89PNG" + bytes(image_bytes)))
    return [
        ChatMessage.system("be brief"),
        ChatMessage.user("what is on the home page?"),
        ChatMessage(role="assistant", tool_calls=[ToolCall(id="c1", name="screenshot")]),
        ChatMessage.tool_result("c1", "screenshot", result_parts),
    ]


def build_ms(provider: str, messages: list[ChatMessage], rounds: int = 300) -> float:
    build = BUILDERS[provider]
    started = time.perf_counter()
    for _ in range(rounds):
        build(messages)
    return (time.perf_counter() - started) / rounds * 1000


async def calls_per_second(model: ChatModel, calls: int, in_flight: int) -> float:
    limit = asyncio.Semaphore(in_flight)
    messages = conversation(0)

    async def one() -> None:
        async with limit:
            await model.achat(messages)

    await model.achat(messages)  # warm up: client built, connections opened
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    elapsed = time.perf_counter() - started
    await model.aclose()
    return calls / elapsed


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    header = ("provider", "build text", "build 100KB img", "seq calls/s", "64 in flight")
    print("{:18} {:>11} {:>16} {:>12} {:>13}".format(*header))
    for provider, reply in REPLIES.items():
        with LoopbackStubServer(responder=lambda _request, reply=reply: reply) as stub:
            model = create_model(
                provider, "bench", api_key="k", base_url=stub.url + PREFIX[provider]
            )
            sequential = asyncio.run(calls_per_second(model, calls, 1))
            concurrent = asyncio.run(calls_per_second(model, calls, 64))
        print(
            f"{provider:18} {build_ms(provider, conversation(0)):9.3f}ms "
            f"{build_ms(provider, conversation(100_000)):14.3f}ms "
            f"{sequential:12.0f} {concurrent:13.0f}"
        )


if __name__ == "__main__":
    main()
