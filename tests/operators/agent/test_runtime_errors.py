"""Failures: provider errors, tool errors, unknown tools, missing media, bad input records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from doubles import drive, scripted_runtime

from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import Budgets
from streamagents.operators.agent.records import InputError, parse_input
from streamagents.testing import Reply, ScriptedTestModel, answer, calls

RAW = '{"id": "in-1", "key": "k", "text": "go", "source": "test"}'


class RateLimitedTestError(Exception):
    """Stands in for a provider error raised after the adapter's retries."""


def flaky(city: str) -> str:
    """A tool that fails."""
    raise ValueError(f"station {city} is offline")


def make_runtime(tmp_path: Path, *replies: Reply, **config: Any) -> AgentRuntime:
    return scripted_runtime(tmp_path, replies, [flaky], **config)


def test_provider_error_ends_the_run_with_error_output_and_dead_letter(tmp_path: Path) -> None:
    error = RateLimitedTestError("429 quota exhausted for model scripted")
    runtime = make_runtime(tmp_path, calls(("flaky", {"city": "Oz"})), error)
    done = drive(runtime, RAW)
    assert done.output["status"] == "error"
    assert done.output["error"] == {
        "type": "RateLimitedTestError",
        "message": "429 quota exhausted for model scripted",
    }
    assert done.output["model_calls"] == 2 and done.output["tool_calls"] == 1
    assert done.dead_letter == {
        "stage": "run",
        "error_type": "RateLimitedTestError",
        "reason": "429 quota exhausted for model scripted",
        "key": "k",
        "id": "in-1",
        "input": RAW,
    }
    assert done.history is None
    types = [e["event_type"] for e in done.events]
    assert types[-3:] == ["chat_response", "error", "output"]
    assert done.events[-3]["payload"]["error_class"] == "RateLimitedTestError"
    assert done.events[-2]["payload"]["error_message"] == "429 quota exhausted for model scripted"


def test_tool_exception_goes_back_to_the_model_and_the_run_continues(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, calls(("flaky", {"city": "Oz"})), answer("sorry"))
    done = drive(runtime, RAW)
    assert done.output["status"] == "ok" and done.output["text"] == "sorry"
    assert isinstance(runtime.model, ScriptedTestModel)
    result = runtime.model.calls[1].messages[-1]
    assert result.is_error and result.content == "ValueError: station Oz is offline"
    response = next(e for e in done.events if e["event_type"] == "tool_response")
    assert response["payload"]["tool_results"][0]["is_error"] is True


def test_one_unknown_tool_call_is_answered_with_an_error_and_the_model_recovers(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(tmp_path, calls(("teleport", {})), answer("cannot teleport"))
    done = drive(runtime, RAW)
    assert done.output["status"] == "ok" and done.dead_letter is None
    assert done.output["tool_calls"] == 1
    assert isinstance(runtime.model, ScriptedTestModel)
    result = runtime.model.calls[1].messages[-1]
    assert result.is_error and "unknown tool 'teleport'" in result.content


def test_unknown_tool_calls_beyond_the_tolerance_end_the_run_with_a_dead_letter(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(
        tmp_path,
        calls(("teleport", {})),
        calls(("fly", {})),
        budgets=Budgets(max_unknown_tool_calls=1),
    )
    done = drive(runtime, RAW)
    assert done.output["status"] == "error"
    assert done.output["error"]["type"] == "UnknownTool"
    assert "'fly'" in done.output["error"]["message"]
    assert "known tools: flaky" in done.output["error"]["message"]
    assert done.dead_letter is not None and done.dead_letter["error_type"] == "UnknownTool"
    assert done.dead_letter["input"] == RAW


def test_zero_tolerance_ends_the_run_at_the_first_unknown_tool(tmp_path: Path) -> None:
    runtime = make_runtime(
        tmp_path, calls(("teleport", {})), budgets=Budgets(max_unknown_tool_calls=0)
    )
    done = drive(runtime, RAW)
    assert done.output["error"]["type"] == "UnknownTool"
    assert done.output["tool_calls"] == 1


def test_a_media_ref_the_store_cannot_read_fails_the_run_with_a_dead_letter(
    tmp_path: Path,
) -> None:
    raw = (
        '{"id": "in-2", "key": "k", "parts": [{"kind": "image", "mime_type": "image/png", '
        '"ref": {"sha256": "' + "ab" * 32 + '", "mime_type": "image/png", "size_bytes": 10}}]}'
    )
    runtime = make_runtime(tmp_path)
    done = drive(runtime, raw)
    assert done.output["status"] == "error"
    assert done.output["error"]["type"] == "MediaNotFound"
    assert "ab" * 32 in done.output["error"]["message"]
    assert done.dead_letter is not None and done.dead_letter["input"] == raw
    assert done.output["model_calls"] == 0
    assert isinstance(runtime.model, ScriptedTestModel) and runtime.model.calls == []


@pytest.mark.parametrize(
    ("raw", "error_type", "message"),
    [
        ("not json", "InvalidJson", "not valid JSON"),
        ("[1, 2]", "InvalidJson", "JSON object, not list"),
        ('{"text": "hi"}', "MissingKey", "key field 'key' is missing"),
        ('{"key": true, "text": "hi"}', "InvalidKey", "string or a number"),
        ('{"key": "k"}', "InvalidInput", "neither text nor parts"),
        ('{"key": "k", "text": 5}', "InvalidInput", "text must be a string"),
        ('{"key": "k", "id": 7, "text": "x"}', "InvalidId", "id must be a non-empty string"),
        (
            '{"key": "k", "parts": [{"kind": "image", "mime_type": "image/png", "data": "@@"}]}',
            "InvalidPart",
            "parts.0.image.data",
        ),
        (
            '{"key": "k", "parts": [{"kind": "image", "mime_type": "audio/wav", "url": "https://x/a"}]}',
            "InvalidPart",
            "not allowed in a image part",
        ),
    ],
)
def test_bad_input_records_raise_input_error_naming_the_rule(
    raw: str, error_type: str, message: str
) -> None:
    with pytest.raises(InputError, match=message) as caught:
        parse_input(raw, "key")
    assert caught.value.error_type == error_type
    assert isinstance(caught.value, ValueError)


def test_input_error_never_quotes_the_media_payload() -> None:
    secret = "A" * 41 + "!"
    raw = '{"key": "k", "parts": [{"kind": "image", "mime_type": "image/png", "data": "%s"}]}'
    with pytest.raises(InputError) as caught:
        parse_input(raw % secret, "key")
    assert secret not in str(caught.value) and "AAAA" not in str(caught.value)


def test_a_timeout_raised_by_the_model_call_is_a_provider_error_not_the_run_budget(
    tmp_path: Path,
) -> None:
    done = drive(make_runtime(tmp_path, TimeoutError("read timed out")), RAW)
    assert done.output["error"] == {"type": "TimeoutError", "message": "read timed out"}
    assert done.dead_letter is not None and done.dead_letter["error_type"] == "TimeoutError"
