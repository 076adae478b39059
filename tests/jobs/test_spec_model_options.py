"""A model's options and generation options in a spec: each provider's own, a misspelt or
foreign key named by `streamagents validate` at its line with the nearest known key."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.jobs.cli.main import main
from streamagents.jobs.spec import SpecError, load_spec

SPEC = """\
name: tickets
source:
  files: {path: in}
key: customer.id
agent:
  model:
    provider: PROVIDER
    model: some-model
    options:
      api_key: "${API_KEY}"
      max_retries: 2
    generation:
      temperature: 0.2
      max_tokens: 400
      EXTRA
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""
ENV = {"API_KEY": "sk-never-shown"}


def spec(tmp_path: Path, provider: str, extra: str) -> Path:
    return write_spec(tmp_path, SPEC.replace("PROVIDER", provider).replace("EXTRA", extra))


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(path, ENV)
    return str(caught.value)


def test_validate_names_a_misspelt_generation_option_its_line_and_the_nearest_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_KEY", ENV["API_KEY"])
    path = spec(tmp_path, "gemini", "top_pp: 0.9")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}:15: agent.model.generation.top_pp: unknown generation option 'top_pp'; "
        "did you mean 'top_p'?"
    ) in err
    assert "sk-never-shown" not in err


@pytest.mark.parametrize(
    ("provider", "extra"),
    [
        ("gemini", "thinking_config: {thinking_budget: 128}"),
        ("demo", "response_mime_type: application/json"),
        ("gemini-interactions", "thinking_level: low"),
        ("openai", "reasoning_effort: low"),
        ("openai", "extra_body: {top_k: 20}"),
        ("openai-responses", "reasoning: {effort: low}"),
    ],
)
def test_each_provider_takes_its_own_generation_options(
    tmp_path: Path, provider: str, extra: str
) -> None:
    text = spec(tmp_path, provider, extra).read_text()
    if provider == "demo":
        text = text.replace("    options:", "    responder: tickets_demo:reply\n    options:")
    loaded = load_spec(write_spec(tmp_path, text), ENV)
    key = extra.split(":")[0]
    assert set(loaded.model.generation) == {"temperature", "max_tokens", key}


@pytest.mark.parametrize(
    ("provider", "extra", "expected"),
    [
        ("gemini", "reasoning_effort: low", "unknown generation option 'reasoning_effort'"),
        ("openai", "thinking_config: {}", "unknown generation option 'thinking_config'"),
        ("openai", "top_k: 20", "unknown generation option 'top_k'"),
        ("openai-responses", "max_completion_tokens: 9", "'max_completion_tokens'"),
        ("gemini", "temperature: warm", "generation.temperature: expected a valid number"),
    ],
)
def test_an_option_another_wire_takes_or_a_bad_value_is_refused_at_its_line(
    tmp_path: Path, provider: str, extra: str, expected: str
) -> None:
    if extra.startswith("temperature"):
        text = SPEC.replace("temperature: 0.2", extra).replace("EXTRA", "seed: 1")
        path = write_spec(tmp_path, text.replace("PROVIDER", provider))
        line = 13
    else:
        path, line = spec(tmp_path, provider, extra), 15
    message = refusal(path)
    assert f":{line}: agent.model.generation." in message and expected in message


def test_a_misspelt_client_option_is_named_at_its_line_and_no_value_shown(
    tmp_path: Path,
) -> None:
    text = SPEC.replace("PROVIDER", "openai").replace("EXTRA", "seed: 1")
    text = text.replace(
        "      max_retries: 2", "      max_retry: 2\n      organisation: sk-org-never-shown"
    )
    message = refusal(write_spec(tmp_path, text))
    assert (
        ":11: agent.model.options.max_retry: unknown option 'max_retry'; did you mean " in message
    )
    assert "'max_retries'?" in message
    assert (
        ":12: agent.model.options.organisation: unknown option 'organisation'; did you mean "
    ) in message
    assert "'organization'?" in message
    assert "sk-org-never-shown" not in message and "sk-never-shown" not in message
