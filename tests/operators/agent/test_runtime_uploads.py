"""`upload_media` through the runtime: a run's image goes to the provider's file API and the
request refers to it; a provider that refuses the file twice gives an error output and a
dead letter with the reason, without the key."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doubles import drive

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest
from streamagents.connectors.providers.file_uploads import UploadMedia
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.testing.files_double import GEMINI_FILE_URI, ProviderFilesDouble

API_KEY = "test-key-do-not-leak"
SCREENSHOT = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 800
OK = {"candidates": [{"content": {"parts": [{"text": "a login form"}]}, "finishReason": "STOP"}]}


def ok(_request: RecordedRequest) -> dict[str, Any]:
    return OK


@pytest.fixture
def files() -> ProviderFilesDouble:
    return ProviderFilesDouble(ok)


@pytest.fixture
def server(files: ProviderFilesDouble) -> Iterator[LoopbackStubServer]:
    with LoopbackStubServer(files) as running:
        yield running


def runtime(server: LoopbackStubServer, tmp_path: Path) -> AgentRuntime:
    return AgentRuntime.from_config(
        AgentConfig(
            model=ModelSpec(
                provider="gemini",
                model="gemini-3-flash",
                options={"api_key": API_KEY, "base_url": server.url, "max_retries": 0},
                upload_media=UploadMedia(min_bytes=100_000),
            ),
            media_store=str(tmp_path / "media"),
        )
    )


def screenshot_input(key: str) -> str:
    part = {
        "kind": "image",
        "mime_type": "image/png",
        "data": base64.b64encode(SCREENSHOT).decode(),
    }
    return json.dumps({"key": key, "text": "what is on the screen?", "parts": [part]})


def test_a_runs_image_is_uploaded_once_and_referred_to_by_every_key(
    server: LoopbackStubServer, files: ProviderFilesDouble, tmp_path: Path
) -> None:
    agent = runtime(server, tmp_path)
    answers = [drive(agent, screenshot_input(key)) for key in ("k1", "k2")]
    assert [a.output["text"] for a in answers] == ["a login form"] * 2
    assert [u.data for u in files.uploads] == [SCREENSHOT]
    calls = [r for r in server.requests if r.path.endswith(":generateContent")]
    for call in calls:
        assert GEMINI_FILE_URI + "files/stub-1" in call.body.decode()
        assert len(call.body) < 1000


def test_a_file_refused_twice_gives_an_error_output_and_a_dead_letter_with_the_reason(
    server: LoopbackStubServer, files: ProviderFilesDouble, tmp_path: Path
) -> None:
    files.refuse_all = True
    raw = screenshot_input("k")
    done = drive(runtime(server, tmp_path), raw)
    assert done.output["status"] == "error" and done.output["error"]["type"] == "BadRequest"
    assert done.dead_letter is not None
    assert (done.dead_letter["stage"], done.dead_letter["input"]) == ("run", raw)
    assert "403" in done.dead_letter["reason"]
    assert "permission to access the File" in done.dead_letter["reason"]
    assert len(files.uploads) == 2
    assert API_KEY not in done.dead_letter["reason"] and API_KEY not in str(done.events)
