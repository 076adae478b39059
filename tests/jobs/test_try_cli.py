"""`streamagents try`: one input through a spec's agent, each step printed, then the answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from streamagents.jobs.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The first example, copied (its media store goes under tmp_path), on its demo model."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return Path(shutil.copy(EXAMPLE, tmp_path / "job.yaml"))


def _steps(out: str) -> list[str]:
    """The event type of each step line, in print order."""
    return [line.split()[2] for line in out.splitlines() if line[:9].strip().endswith(" s")]


def test_try_prints_each_step_then_the_answer(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {"id": "T-1", "customer": {"id": "C-17"}, "text": "Where is my order O-5521?"}
    assert main(["try", str(spec), "--input", json.dumps(line)]) == 0
    captured = capsys.readouterr()
    assert _steps(captured.out) == [
        "input",
        "chat_request",
        "chat_response",
        "tool_request",
        "tool_response",
        "chat_request",
        "chat_response",
        "output",
    ]
    assert 'lookup_order({"order_id": "O-5521"})' in captured.out
    assert '"status":"delivered"' in captured.out  # the real tool's result
    answer = captured.out.split("\nanswer (", 1)[1]
    assert "model calls: 2, tool calls: 1" in answer
    assert "order O-5521 is delivered" in answer
    assert "DEMO MODE" in captured.err  # the demo says it is one


def test_try_refuses_an_input_without_the_key_field(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["try", str(spec), "--input", '{"id": "T-1", "text": "hi"}']) == 2
    assert "invalid input: key field 'customer.id' is missing" in capsys.readouterr().err


def test_try_refuses_input_that_is_not_json(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["try", str(spec), "--input", "where is my order?"]) == 2
    assert "invalid input" in capsys.readouterr().err


def test_try_reports_a_spec_error_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsource: {files: {path: in}}\nkey: k\nagnet: {}\n")
    assert main(["try", str(bad), "--input", "{}"]) == 2
    assert "invalid job spec" in capsys.readouterr().err
