"""The CLI never prints a value taken from the environment, nor a credential in a URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamagents.jobs.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


def test_validate_hides_an_env_value_in_a_sink_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SINK_PASSWORD", "Tr0ub4dor-and-3")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        EXAMPLE.read_text().replace(
            "outputs: {path: out/support_tickets/answers}",
            "outputs: {path: 's3://writer:${SINK_PASSWORD}@bucket/answers'}",
        )
    )
    assert main(["validate", str(spec)]) == 0
    captured = capsys.readouterr()
    assert "Tr0ub4dor-and-3" not in captured.out + captured.err
    assert "outputs    s3://[REDACTED]@bucket/answers" in captured.out


def test_validate_hides_a_literal_password_in_a_sink_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        EXAMPLE.read_text().replace(
            "dead_letters: {path: out/support_tickets/dead_letters}",
            "dead_letters: {path: 's3://writer:literal-pw-42@bucket/dead'}",
        )
    )
    assert main(["validate", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "literal-pw-42" not in out
    assert "dead       s3://[REDACTED]@bucket/dead" in out
