"""`streamagents validate`: checks a spec and its tools without starting Flink."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamagents.jobs.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


def test_validate_accepts_the_example_and_names_the_demo_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["validate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "valid" in out and "support-tickets" in out
    assert "demo support-demo (scripted test double, not an LLM)" in out
    assert "support_tools:fetch_attachment" in out


def test_validate_never_prints_the_api_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "AIza-this-must-never-be-printed"
    monkeypatch.setenv("GEMINI_API_KEY", secret)
    assert main(["validate", str(EXAMPLE)]) == 0
    captured = capsys.readouterr()
    assert "gemini gemini-2.5-flash" in captured.out
    assert secret not in captured.out + captured.err


def test_validate_reports_spec_errors_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-never-print-me"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    bad = EXAMPLE.read_text().replace("max_in_flight: 16", "max_in_flite: 16")
    spec = tmp_path / "bad.yaml"
    spec.write_text(bad)
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"{spec}:32: agent.max_in_flite: unknown key" in err
    assert "did you mean 'max_in_flight'?" in err
    assert secret not in err


def test_validate_reports_a_broken_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "tools.yaml"
    spec.write_text(
        EXAMPLE.read_text().replace("support_tools:lookup_order", "support_tools:lookup_orders")
    )
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "agent.tools[0]" in err and "lookup_orders" in err


def test_validate_of_a_missing_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read: No such file or directory" in capsys.readouterr().err


def test_validate_refuses_an_event_log_uri_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s3.yaml"
    spec.write_text(
        EXAMPLE.read_text().replace("path: out/support_tickets/events", "path: s3://bucket/events")
    )
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"{spec}:36: event_log.path: expected a local (or mounted) directory, not a URI" in err


def test_the_docs_example_of_errors_in_a_spec_is_what_validate_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (EXAMPLE.parents[2] / "docs" / "jobs-and-cli.md").read_text()
    section = page.split("### Errors in a spec", 1)[1].split("\n## ", 1)[0]
    spec_text = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    command, expected = shown.split("\n", 1)
    assert command == "$ streamagents validate typo.yaml"
    (tmp_path / "typo.yaml").write_text(spec_text)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "typo.yaml"]) == 2
    assert capsys.readouterr().err == expected
