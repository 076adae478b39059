"""AgentConfig: contract defaults, JSON and pickle round trips, clear validation errors."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from streamagents.operators.agent.config import AgentConfig, Budgets, MemoryConfig, ModelSpec


def config() -> AgentConfig:
    return AgentConfig(
        model=ModelSpec(provider="gemini", model="gemini-2.5-flash", options={"timeout": 30}),
        tools=["json:dumps"],
        memory=MemoryConfig(ttl_seconds=3600),
        budgets=Budgets(max_tokens=10_000),
    )


def test_defaults_match_the_contract() -> None:
    cfg = AgentConfig(model=ModelSpec(provider="openai", model="gpt-4o-mini"))
    assert (cfg.job_id, cfg.system_prompt, cfg.tools, cfg.key_field) == (
        "streamagents",
        "",
        [],
        "key",
    )
    assert (cfg.max_in_flight, cfg.media_store, cfg.offload_threshold_bytes) == (64, "media", 65536)
    assert (cfg.event_log_level, cfg.tool_timeout_s) == ("standard", 60.0)
    assert cfg.max_tool_result_bytes == 32 * 1024 * 1024
    assert cfg.memory == MemoryConfig(max_messages=40, max_bytes=262144, ttl_seconds=None)
    assert cfg.budgets.model_dump() == {
        "max_model_calls": 8,
        "max_tool_calls": 16,
        "max_tokens": None,
        "run_timeout_s": 300.0,
        "max_unknown_tool_calls": 1,
        "per_key": None,
        "per_tenant": None,
        "per_job": None,
    }
    assert cfg.model.options == {} and cfg.model.generation == {}


def test_config_round_trips_through_json_and_pickle() -> None:
    cfg = config()
    assert AgentConfig.model_validate_json(cfg.model_dump_json()) == cfg
    assert pickle.loads(pickle.dumps(cfg)) == cfg


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"event_log_level": "chatty"}, "event log level"),
        ({"budgets": {"max_model_calls": 0}}, "max_model_calls"),
        ({"budgets": {"run_timeout_s": 0}}, "run_timeout_s"),
        ({"memory": {"max_messages": -1}}, "max_messages"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_settings_are_refused_naming_the_field(changes: dict, field: str) -> None:
    data = {"model": {"provider": "gemini", "model": "m"}, **changes}
    with pytest.raises(ValidationError, match=field):
        AgentConfig.model_validate(data)


def test_log_level_is_case_insensitive() -> None:
    cfg = AgentConfig(model=ModelSpec(provider="gemini", model="m"), event_log_level="VERBOSE")
    assert cfg.event_log_level == "verbose"


def test_model_spec_repr_hides_secret_option_values_but_keeps_them_for_use() -> None:
    secrets = ["sk-secret-key", "Bearer header-token"]
    options = {
        "api_key": secrets[0],
        "default_headers": {"Authorization": secrets[1], "X-Team": "blue"},
        "base_url": "http://127.0.0.1:9/v1",
        "max_retries": 2,
    }
    spec = ModelSpec(provider="openai", model="gpt-x", options=options)
    config = AgentConfig(model=spec)
    for text in (repr(spec), str(spec), repr(config), str(config)):
        assert not [s for s in secrets if s in text], text
        assert "api_key" in text and "Authorization" in text and "X-Team" in text
        assert "http://127.0.0.1:9/v1" in text and "max_retries" in text
    assert spec.options == options
    assert ModelSpec.model_validate_json(spec.model_dump_json()).options["api_key"] == secrets[0]
