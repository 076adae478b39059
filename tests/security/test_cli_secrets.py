"""The CLI never prints a value taken from the environment, nor a credential in a URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamagents.jobs.cli.main import main

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


def test_validate_warns_when_credentials_go_to_a_plain_http_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    text = EXAMPLE.read_text()
    assert "  max_in_flight: 16\n" in text
    mcp = (
        "  mcp_servers:\n"
        "    - name: crm\n"
        "      transport: {type: http, url: 'http://crm.internal.example/mcp',"
        " headers: {Authorization: 'Bearer abc'}}\n"
        "      allow: ['*']\n"
        "    - name: local\n"
        "      transport: {type: http, url: 'http://127.0.0.1:9/mcp',"
        " headers: {Authorization: 'Bearer abc'}}\n"
        "      allow: ['*']\n"
    )
    spec.write_text(text.replace("  max_in_flight: 16\n", "  max_in_flight: 16\n" + mcp, 1))
    assert main(["validate", str(spec)]) == 0
    err = capsys.readouterr().err
    assert "warning: MCP server 'crm' sends credentials over plain http" in err
    assert "'local'" not in err


def test_validate_warns_when_the_collector_gets_its_token_over_plain_http(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTLP_TOKEN", "Bearer otlp-token-123")
    spec = tmp_path / "spec.yaml"
    block = (
        "telemetry:\n  otlp_endpoint: http://collector.example:4318\n"
        '  headers: {Authorization: "${OTLP_TOKEN}"}\n'
    )
    spec.write_text(EXAMPLE.read_text() + block)
    assert main(["validate", str(spec)]) == 0
    captured = capsys.readouterr()
    assert "warning: telemetry sends credentials over plain http to collector.example" in (
        captured.err
    )
    assert "otlp-token-123" not in captured.out + captured.err
