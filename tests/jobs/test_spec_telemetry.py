"""The spec's `telemetry` block, the `OTEL_*` variables that complete it, and `validate`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streamagents.jobs.cli.main import main
from streamagents.jobs.spec import SpecError, load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "jobs" / "examples"
SECRET = "Bearer telemetry-header-secret-0123456789"
BLOCK = """
telemetry:
  otlp_endpoint: https://user:pw@collector.example:4318
  headers: {Authorization: "${OTLP_TOKEN}", x-tenant: acme}
  sample_ratio: 0.25
  capture_content: true
"""


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    """A copy of the example job (spec, tools, data) to add telemetry to."""
    return Path(shutil.copytree(EXAMPLES, tmp_path / "job"))


def _spec(job_dir: Path, block: str = "") -> Path:
    spec = job_dir / "support_tickets.yaml"
    spec.write_text(spec.read_text() + textwrap.dedent(block))
    return spec


def test_the_block_gives_the_operator_its_telemetry(job_dir: Path) -> None:
    loaded = load_spec(_spec(job_dir, BLOCK), environ={"OTLP_TOKEN": SECRET})
    telemetry = loaded.telemetry
    assert telemetry is not None
    assert telemetry.otlp_endpoint == "https://user:pw@collector.example:4318"
    assert {k: v.get_secret_value() for k, v in telemetry.headers.items()} == {
        "Authorization": SECRET,
        "x-tenant": "acme",
    }
    assert (telemetry.sample_ratio, telemetry.capture_content) == (0.25, True)
    assert SECRET not in repr(loaded.spec) + repr(telemetry)


def test_validate_shows_where_telemetry_goes_and_no_secret(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTLP_TOKEN", SECRET)
    assert main(["validate", str(_spec(job_dir, BLOCK))]) == 0
    out = capsys.readouterr().out
    assert (
        "telemetry  OTLP to https://collector.example:4318 (sample 0.25, with content, "
        "headers: Authorization, x-tenant)" in out
    )
    assert SECRET not in out and "pw@" not in out


def test_otel_variables_fill_in_what_the_spec_leaves_out(job_dir: Path) -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc,x-tenant=acme",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.5",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    telemetry = load_spec(_spec(job_dir), environ=environ).telemetry
    assert telemetry is not None
    assert telemetry.otlp_endpoint == "http://127.0.0.1:4318"
    assert telemetry.headers["Authorization"].get_secret_value() == "Bearer abc"
    assert (telemetry.sample_ratio, telemetry.capture_content) == (0.5, True)
    # The spec's own values win over the variables.
    block = "telemetry: {sample_ratio: 1, capture_content: false}\n"
    telemetry = load_spec(_spec(job_dir, block), environ=environ).telemetry
    assert telemetry is not None
    assert (telemetry.sample_ratio, telemetry.capture_content) == (1.0, False)
    assert telemetry.otlp_endpoint == "http://127.0.0.1:4318"


def test_the_block_sets_every_operator_telemetry_setting(job_dir: Path) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    telemetry = load_spec(_spec(job_dir), environ=environ).telemetry
    assert telemetry is not None
    assert (telemetry.max_queue_spans, telemetry.export_timeout_s) == (2048, 10.0)
    block = "telemetry: {max_queue_spans: 16, export_timeout_s: 2.5}\n"
    telemetry = load_spec(_spec(job_dir, block), environ=environ).telemetry
    assert telemetry is not None
    assert (telemetry.max_queue_spans, telemetry.export_timeout_s) == (16, 2.5)


def test_an_always_off_sampler_traces_no_run(job_dir: Path) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_TRACES_SAMPLER": "always_off"}
    telemetry = load_spec(_spec(job_dir), environ=environ).telemetry
    assert telemetry is not None and telemetry.sample_ratio == 0.0


def test_without_block_or_variables_or_with_the_sdk_disabled_nothing_is_sent(
    job_dir: Path,
) -> None:
    assert load_spec(_spec(job_dir), environ={}).telemetry is None
    environ = {"OTEL_SDK_DISABLED": "true", "OTLP_TOKEN": SECRET}
    assert load_spec(_spec(job_dir, BLOCK), environ=environ).telemetry is None


@pytest.mark.parametrize(
    ("block", "environ", "expected"),
    [
        ("telemetry: {sample_ratio: 0.5}\n", {}, "telemetry: no otlp_endpoint"),
        (
            "telemetry: {}\n",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x", "OTEL_EXPORTER_OTLP_HEADERS": SECRET},
            "telemetry: OTEL_EXPORTER_OTLP_HEADERS: entry 1 is not NAME=VALUE",
        ),
        (
            "",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": f"ftp://{SECRET}"},
            "telemetry: OTEL_EXPORTER_OTLP_ENDPOINT is not an http(s):// URL",
        ),
        (
            "",
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h",
                "OTEL_TRACES_SAMPLER": "traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": "1.5",
            },
            "telemetry: OTEL_TRACES_SAMPLER_ARG: input should be less than or equal to 1",
        ),
        (
            "telemetry: {otlp_endpoint: 'http://h', max_queue_spans: 0}\n",
            {},
            "telemetry.max_queue_spans: expected greater than or equal to 1",
        ),
        (
            "telemetry: {otlp_endpoint: 'http://h', headers: {Authorization: [x]}}\n",
            {"OTLP_TOKEN": SECRET},
            "telemetry.headers.Authorization: expected a valid string",
        ),
        (
            "telemetry: {otlp_endpoint: 'collector:4318'}\n",
            {},
            "telemetry.otlp_endpoint: expected a string that should match pattern",
        ),
    ],
)
def test_bad_telemetry_settings_are_named_without_their_values(
    job_dir: Path, block: str, environ: dict[str, str], expected: str
) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(job_dir, block), environ=environ)
    assert expected in str(caught.value)
    assert SECRET not in str(caught.value)


def test_without_the_extra_validate_says_what_to_install(job_dir: Path) -> None:
    # Another interpreter in which the SDK cannot be imported, as when it is not installed.
    program = (
        "import sys\n"
        "sys.modules['opentelemetry.sdk.trace'] = None\n"
        "from streamagents.jobs.cli.main import main\n"
        f"sys.exit(main(['validate', {str(_spec(job_dir, BLOCK))!r}]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env={"OTLP_TOKEN": SECRET, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "telemetry: set, but OpenTelemetry export needs the SDK" in result.stderr
    assert "pip install 'streamagents[otel]'" in result.stderr
    assert SECRET not in result.stderr + result.stdout
