"""Provider file uploads (`upload_media`): ten turns of one key re-sending a 5 MB image.

A key's conversation starts with a 5 MB screenshot (held by ref in the media store, as the
runtime keeps it) and goes on for ten turns; each turn sends the whole history, so without
uploads every request carries the image again, inline as base64. With `upload_media` the
image goes to the provider's file API once and every request refers to it. For each wire
(Gemini, OpenAI Responses) through its real SDK against the loopback stub and its file-API
double (`ProviderFilesDouble`, in this process), this prints, with and without uploads:
the bytes the stub received (request bodies, the upload included), the largest request,
and the wall time of the ten turns (the first turn's upload included), each the median of
`rounds` runs alternated between the two settings.

Run: python benchmarks/bench_uploads.py [rounds]
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import create_model
from streamagents.connectors.providers.file_uploads import UploadMedia
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart
from streamagents.testing.files_double import ProviderFilesDouble

IMAGE = b"\x89PNG\r\n\x1a\n" + os.urandom(5 * 1024 * 1024 - 8)
TURNS = 10
REPLIES: dict[str, dict[str, Any]] = {
    "gemini": {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]},
    "openai-responses": {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ]
    },
}


def reply(request: RecordedRequest) -> dict[str, Any]:
    """The ok reply of the API the request is for."""
    return REPLIES["gemini" if request.path.endswith(":generateContent") else "openai-responses"]


async def ten_turns(provider: str, stub: LoopbackStubServer, root: str, upload: bool) -> float:
    """One key's ten turns; the wall time in seconds."""
    store = MediaStore(root)
    base_url = stub.url if provider == "gemini" else stub.url + "/v1"
    model = create_model(
        provider,
        "bench",
        api_key="bench-key",
        base_url=base_url,
        max_retries=0,
        timeout=120,
        media_store=store,
        upload_media=UploadMedia(min_bytes=1_000_000) if upload else None,
    )
    image = ImagePart(mime_type="image/png", ref=store.put(IMAGE, "image/png"))
    history = [ChatMessage(role="user", parts=[TextPart(text="what is on screen?"), image])]
    started = time.perf_counter()
    for turn in range(TURNS):
        answer = await model.achat(history)
        history += [answer.message, ChatMessage.user(f"and now, question {turn + 2}?")]
    elapsed = time.perf_counter() - started
    await model.aclose()
    return elapsed


def main() -> None:
    """Run each wire with and without uploads, alternated, and print the medians."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"{TURNS} turns of one key, a {len(IMAGE) / 2**20:.0f} MiB image in its history")
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()}")
    print(f"{'wire':18} {'uploads':8} {'bytes sent':>12} {'largest request':>16} {'wall s':>8}")
    for provider in ("gemini", "openai-responses"):
        figures: dict[bool, list[tuple[int, int, float]]] = {False: [], True: []}
        for _ in range(rounds):
            for upload in (False, True):
                with (
                    tempfile.TemporaryDirectory() as root,
                    LoopbackStubServer(ProviderFilesDouble(reply)) as stub,
                ):
                    wall = asyncio.run(ten_turns(provider, stub, root, upload))
                    sizes = [len(r.body) for r in stub.requests]
                    figures[upload].append((sum(sizes), max(sizes), wall))
        for upload in (False, True):
            sent, largest, wall = (
                statistics.median(f[i] for f in figures[upload]) for i in (0, 1, 2)
            )
            print(
                f"{provider:18} {'on' if upload else 'off':8} {sent / 2**20:>9.1f} MiB"
                f" {largest / 2**20:>12.2f} MiB {wall:>8.2f}"
            )


if __name__ == "__main__":
    main()
