"""The SDK worker process: runs a chat model's requests for the `SdkProcessModel` that
started it, under an interpreter (and a GIL) of its own.

Started as `python -m streamagents.connectors.providers.sdk_worker`; frames (see
`_worker_frames`) come on stdin and go back on the original stdout, which is then pointed
at stderr so nothing a library prints can corrupt them. The first frame is the pickled
model, answered by a ready frame once it is loaded; each request runs as a task of its
own, many at once. The worker exits when its stdin ends: its client closed it, or the
client's process died.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import sys

from pydantic import TypeAdapter

from streamagents.connectors.providers._worker_frames import (
    CANCEL,
    ERROR,
    READY,
    REQUEST,
    RESPONSE,
    SETUP,
    error_json,
    frame,
    read_frame,
    split_blobs,
)
from streamagents.connectors.providers.base import ChatModel
from streamagents.serde.chat import ToolSpec
from streamagents.serde.messages import ChatMessage

_TOOLS = TypeAdapter(list[ToolSpec])


class _Parsed:
    """Messages parsed from their JSON, remembered by it (a key's history comes again with
    every call), bounded by the bytes of JSON kept, the oldest dropped first."""

    def __init__(self, max_bytes: int = 16 << 20) -> None:
        self._max_bytes = max_bytes
        self._messages: dict[bytes, ChatMessage] = {}
        self._bytes = 0

    def message(self, data: bytes) -> ChatMessage:
        message = self._messages.get(data)
        if message is None:
            message = self._messages[data] = ChatMessage.model_validate_json(data)
            self._bytes += len(data)
            while self._bytes > self._max_bytes:
                self._bytes -= len(self._messages.pop(next(iter(self._messages))))
        return message


class _Worker:
    """Answers the requests of one client with one model."""

    def __init__(self, model: ChatModel, writer: asyncio.StreamWriter) -> None:
        self.model = model
        self.writer = writer
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.parsed = _Parsed()
        self.tools: dict[bytes, list[ToolSpec]] = {}

    def start(self, call_id: int, payload: bytes) -> None:
        task = asyncio.create_task(self._answer(call_id, payload))
        self.tasks[call_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(call_id, None))

    def cancel(self, call_id: int) -> None:
        task = self.tasks.pop(call_id, None)
        if task is not None:
            task.cancel()

    async def _answer(self, call_id: int, payload: bytes) -> None:
        try:
            tools_json, options, *texts = split_blobs(payload)
            tools = self.tools.get(tools_json)
            if tools is None:
                tools = self.tools[tools_json] = _TOOLS.validate_json(tools_json)
            messages = [self.parsed.message(text) for text in texts]
            response = await self.model.achat(messages, tools, **json.loads(options))
            reply = frame(RESPONSE, call_id, response.model_dump_json().encode())
        except Exception as error:
            reply = frame(ERROR, call_id, error_json(error))
        self.writer.write(reply)
        await self.writer.drain()

    async def close(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        await self.model.aclose()


async def serve(frames_out: int) -> None:
    """Read the model, then requests, until stdin ends."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(frames_out, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    kind, _, payload = await read_frame(reader)
    if kind != SETUP:
        raise SystemExit(f"sdk_worker: expected the setup frame first, got {kind!r}")
    try:
        model = pickle.loads(payload)
    except Exception as error:  # a module missing here, a version mismatch: say so and end
        writer.write(frame(ERROR, 0, error_json(error)))
        await writer.drain()
        raise SystemExit(1) from None
    writer.write(frame(READY, 0))
    worker = _Worker(model, writer)
    try:
        while True:
            try:
                kind, call_id, payload = await read_frame(reader)
            except asyncio.IncompleteReadError:
                return
            if kind == REQUEST:
                worker.start(call_id, payload)
            elif kind == CANCEL:
                worker.cancel(call_id)
    finally:
        await worker.close()


def main() -> None:
    """Keep the original stdout for frames and send everything printed to stderr."""
    frames_out = os.dup(1)
    os.dup2(2, 1)
    asyncio.run(serve(frames_out))


if __name__ == "__main__":
    main()
