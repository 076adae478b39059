"""Media in runs: offloaded to the store above the threshold, refs in state, events, outputs."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from doubles import drive, scripted_runtime

from streamagents.operators.agent import AgentRuntime, RunState
from streamagents.operators.engine.stored_history import StoredHistory
from streamagents.serde.chat import ChatResponse
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart
from streamagents.testing import Reply, ScriptedTestModel, answer, calls

BIG = b"\x89PNG\r\n\x1a\n" + hashlib.sha256(b"seed").digest() * 4096  # ~128 KiB
SMALL = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100


def camera(name: str) -> list:
    """Take a picture with a camera.

    Args:
        name: Which camera.
    """
    return [f"camera {name}", ImagePart(data=BIG, mime_type="image/png")]


def make_runtime(tmp_path: Path, *replies: Reply) -> AgentRuntime:
    return scripted_runtime(tmp_path, replies, [camera])


def image_input(data: bytes, **fields: object) -> str:
    part = {"kind": "image", "mime_type": "image/png", "data": base64.b64encode(data).decode()}
    return json.dumps({"key": "k", "text": "what is this?", "parts": [part], **fields})


def test_input_media_above_the_threshold_is_offloaded_and_the_model_gets_the_ref(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(tmp_path, answer("a logo"))
    done = drive(runtime, image_input(BIG))
    assert isinstance(runtime.model, ScriptedTestModel)
    sent = runtime.model.calls[0].messages[-1]
    image = sent.parts[1]
    assert image.data is None and image.ref is not None
    assert image.ref.sha256 == hashlib.sha256(BIG).hexdigest()
    assert runtime.store.get(image.ref) == BIG
    input_event = done.events[0]
    logged = input_event["payload"]["messages"][0]["parts"][1]
    assert logged["ref"]["size_bytes"] == len(BIG) and logged["data"] is None


def test_input_media_below_the_threshold_stays_inline(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, answer("tiny"))
    drive(runtime, image_input(SMALL))
    assert isinstance(runtime.model, ScriptedTestModel)
    assert runtime.model.calls[0].messages[-1].parts[1].data == SMALL


def test_events_carry_small_inline_media_as_refs_while_state_keeps_it_inline(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(tmp_path, answer("tiny"))
    done = drive(runtime, image_input(SMALL))
    assert done.states[0].messages[0].parts[1].data == SMALL
    logged = done.events[0]["payload"]["messages"][0]["parts"][1]
    assert logged["data"] is None and logged["ref"]["sha256"] == hashlib.sha256(SMALL).hexdigest()
    assert runtime.store.get(MediaRef.model_validate(logged["ref"])) == SMALL


def test_a_tool_image_is_stored_and_travels_as_a_ref_in_state_and_request(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(tmp_path, calls(("camera", {"name": "north"})), answer("a cat"))
    done = drive(runtime, '{"key": "k", "text": "look"}')
    assert isinstance(runtime.model, ScriptedTestModel)
    result = runtime.model.calls[1].messages[-1]
    assert result.role == "tool" and result.content == "camera north"
    image = result.parts[1]
    assert image.ref is not None and image.data is None
    assert runtime.store.get(image.ref) == BIG
    for state in done.states:
        assert len(state.model_dump_json()) < 4096
    response = next(e for e in done.events if e["event_type"] == "tool_response")
    assert len(json.dumps(response)) < 4096


def test_media_in_the_answer_is_a_ref_in_the_output_record(tmp_path: Path) -> None:
    reply = ChatResponse(
        message=ChatMessage(
            role="assistant",
            parts=[TextPart(text="here"), ImagePart(data=SMALL, mime_type="image/png")],
        )
    )
    runtime = make_runtime(tmp_path, reply)
    done = drive(runtime, '{"key": "k", "text": "draw"}')
    assert done.output["text"] == "here"
    kinds = [p["kind"] for p in done.output["parts"]]
    assert kinds == ["text", "image"]
    image = done.output["parts"][1]
    assert image["data"] is None and image["ref"]["sha256"] == hashlib.sha256(SMALL).hexdigest()


def test_an_answer_with_inline_media_is_logged_as_refs_and_runs_with_the_log_off(
    tmp_path: Path,
) -> None:
    """The events' payload models refuse inline bytes where they are built: the answer's
    image reaches them as a ref, and with nothing logging it is not offloaded for them."""
    reply = ChatResponse(
        message=ChatMessage(
            role="assistant",
            parts=[TextPart(text="here"), ImagePart(data=SMALL, mime_type="image/png")],
        )
    )
    digest = hashlib.sha256(SMALL).hexdigest()
    logged = drive(make_runtime(tmp_path, reply), '{"key": "k", "text": "draw"}')
    for kind in ("chat_response", "output"):
        event = next(e for e in logged.events if e["event_type"] == kind)
        image = event["payload"]["messages"][0]["parts"][1]
        assert image["data"] is None and image["ref"]["sha256"] == digest
    quiet = scripted_runtime(tmp_path, [reply], [camera], event_log_level="off")
    done = drive(quiet, '{"key": "k", "text": "draw"}')
    assert done.events == []
    assert done.output["status"] == "ok" and done.output["parts"][1]["ref"]["sha256"] == digest


def test_a_large_raw_input_is_kept_as_a_ref_and_the_dead_letter_gives_it_back(
    tmp_path: Path,
) -> None:
    raw = image_input(BIG, id="in-7")
    runtime = make_runtime(tmp_path, RuntimeError("provider down"))
    done = drive(runtime, raw)
    assert all(s.raw is None and s.raw_ref is not None for s in done.states)
    assert all(len(s.model_dump_json()) < 4096 for s in done.states)
    assert done.dead_letter is not None and done.dead_letter["input"] == raw


def test_state_stays_small_after_ten_turns_with_five_megabyte_images(tmp_path: Path) -> None:
    images = [hashlib.sha256(bytes([i])).digest() * 32768 for i in range(5)]  # 5 x 1 MiB
    parts = [
        {"kind": "image", "mime_type": "image/png", "data": base64.b64encode(b).decode()}
        for b in images
    ]
    runtime = make_runtime(tmp_path, *[answer(f"turn {i}") for i in range(10)])
    history: list[ChatMessage] = []
    largest_state = 0
    for turn in range(10):
        raw = json.dumps({"id": f"t{turn}", "key": "k", "text": "describe", "parts": parts})
        done = drive(runtime, raw, history=history)
        for state in done.states:
            stored = state.model_dump_json()
            assert RunState.model_validate_json(stored) == state
            largest_state = max(largest_state, len(stored))
        assert done.history is not None
        stored_history = StoredHistory(updated_ms=turn, messages=done.history).encode()
        history = StoredHistory.decode(stored_history).messages
    assert len(history) == 20
    assert largest_state < 4096
    assert len(stored_history) < 16384
