"""`agent.model.fallbacks` and `agent.model.failover` in a job spec: the chain a job runs,
and clear refusals of bad fallback specs (file, line and field named)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.connectors.providers.failover import FailoverModel
from streamagents.jobs.cli.main import main
from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import SpecError, check_runnable, load_spec
from streamagents.operators.agent.config import AgentConfig, ModelSpec
from streamagents.operators.agent.runtime_parts import runtime_parts

DOCS = Path(__file__).resolve().parents[2] / "docs" / "quotas-failover-and-spend.md"
ENV = {"GEMINI_API_KEY": "g-key", "OPENAI_API_KEY": "o-key"}

SPEC = """\
name: tickets
source:
  files: {path: in}
key: customer.id
agent:
  model:
    provider: gemini
    model: gemini-3-pro
    options: {api_key: "${GEMINI_API_KEY}"}
    generation: {temperature: 0.2}
    fallbacks:
      - provider: openai
        model: gpt-fb
        options: {api_key: "${OPENAI_API_KEY}"}
        generation: {max_tokens: 300}
    failover:
      conditions: [server_error, timeout]
      breaker: {failure_threshold: 3, cooldown_s: 60}
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""


def refusal(tmp_path: Path, text: str, runnable: bool = False) -> str:
    with pytest.raises(SpecError) as caught:
        loaded = load_spec(write_spec(tmp_path, text), ENV)
        if runnable:
            check_runnable(loaded)
    return str(caught.value)


def test_a_spec_with_fallbacks_runs_the_chain_in_order_with_each_models_settings(
    tmp_path: Path,
) -> None:
    loaded = load_spec(write_spec(tmp_path, SPEC), ENV)
    check_runnable(loaded)
    assert loaded.model.fallbacks[0].sdk_process is None  # as the entry's: where the job runs
    assert "o-key" not in repr(loaded.model)  # option values never shown
    config = agent_config(loaded, model_spec(loaded.model))
    assert [m.name for m in config.model.chain()] == ["gemini/gemini-3-pro", "openai/gpt-fb"]
    model = runtime_parts(config).model
    assert isinstance(model, FailoverModel)
    assert [(link.name, dict(link.generation)) for link in model.links] == [
        ("gemini/gemini-3-pro", {"temperature": 0.2}),
        ("openai/gpt-fb", {"max_tokens": 300}),
    ]
    assert model.conditions == {"server_error", "timeout"}
    assert model.breakers["openai/gpt-fb"].settings.failure_threshold == 3
    assert model.breakers["openai/gpt-fb"].settings.cooldown_s == 60


def test_validate_names_the_fallbacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    assert main(["validate", str(write_spec(tmp_path, SPEC))]) == 0
    assert "model      gemini gemini-3-pro, then openai gpt-fb" in capsys.readouterr().out


def test_a_fallback_with_an_unknown_provider_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    message = refusal(tmp_path, SPEC.replace("provider: openai", "provider: opnai"))
    assert ":12: agent.model.fallbacks[0].provider: expected 'gemini'" in message
    assert "did you mean 'openai'?" in message


def test_an_unknown_failover_condition_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path, SPEC.replace("[server_error, timeout]", "[server_error, 5xx]"))
    assert ":17: agent.model.failover.conditions[1]: expected 'rate_limited'" in message


def test_a_breaker_that_could_never_open_or_close_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace(
        "failure_threshold: 3, cooldown_s: 60", "failure_threshold: 0, cooldown_s: 0"
    )
    message = refusal(tmp_path, text)
    assert (
        "agent.model.failover.breaker.failure_threshold: expected greater than or equal to 1"
        in message
    )
    assert "agent.model.failover.breaker.cooldown_s: expected greater than 0" in message


def test_failover_settings_without_fallbacks_are_refused(tmp_path: Path) -> None:
    text = re.sub(r"    fallbacks:\n(      .*\n|        .*\n)+", "", SPEC)
    message = refusal(tmp_path, text)
    assert "failover: its settings apply only with fallbacks; add fallbacks" in message


def test_a_model_twice_in_the_chain_is_refused(tmp_path: Path) -> None:
    message = refusal(
        tmp_path,
        SPEC.replace(
            "provider: openai\n        model: gpt-fb",
            "provider: gemini\n        model: gemini-3-pro",
        ),
    )
    assert "fallbacks[0]: gemini/gemini-3-pro is already in the chain (the model itself)" in message


def test_a_fallback_option_its_adapter_does_not_take_is_refused_before_the_job_runs(
    tmp_path: Path,
) -> None:
    text = SPEC.replace('"${OPENAI_API_KEY}"}', '"${OPENAI_API_KEY}", colour: 1}')
    message = refusal(tmp_path, text, runnable=True)
    assert ":14: agent.model.fallbacks[0].options.colour: unknown option 'colour'" in message
    assert "o-key" not in message


def test_builtin_tools_with_a_fallback_that_has_none_are_refused(tmp_path: Path) -> None:
    text = SPEC.replace("sinks:", "  builtin_tools: {google_search: true}\nsinks:")
    message = refusal(tmp_path, text)
    assert "built-in server tools (google_search) exist only on the gemini wire" in message
    assert "fallbacks[0] of the model" in message
    with pytest.raises(ValueError, match="fallbacks\\[0\\] of the model"):
        AgentConfig(
            model=ModelSpec(
                provider="gemini", model="g", fallbacks=[{"provider": "openai", "model": "o"}]
            ),
            builtin_tools={"google_search": True},
        )


def test_the_docs_complete_failover_example_is_a_valid_spec(tmp_path: Path) -> None:
    page = DOCS.read_text()
    example = page.split("<!-- failover-example -->")[1].split("```yaml\n")[1].split("```")[0]
    loaded = load_spec(write_spec(tmp_path, example), ENV)
    assert len(loaded.model.fallbacks) >= 2
    assert {f.provider for f in loaded.model.fallbacks} >= {"openai-responses"}
