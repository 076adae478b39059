"""The YAML job spec: validation errors name file, line and field; secrets stay secret."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.connectors.providers import (
    PROVIDER_NAMES,
    PROVIDERS,
    GeminiChatModel,
    GeminiInteractionsModel,
    RateLimits,
)
from streamagents.connectors.providers._usable_cores import usable_cores
from streamagents.connectors.providers.sdk_process import SdkProcessModel
from streamagents.jobs.examples.sample_data import DATA_DIR, sample_files
from streamagents.jobs.graph import agent_config, flink_configuration
from streamagents.jobs.model_choice import DEMO_API_KEY, model_spec
from streamagents.jobs.spec import SpecError, check_runnable, load_spec
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import AgentConfig, InputLimits
from streamagents.operators.flink import BUFFER_DEBLOAT

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"

MINIMAL = """\
name: tickets
source:
  files: {path: in}
key: customer.id
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: "${GEMINI_API_KEY}"}}
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""


def problems(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(path, {"GEMINI_API_KEY": "test-key"} if env is None else env)
    return str(caught.value)


def test_minimal_spec_loads_with_defaults_and_paths_relative_to_the_spec(tmp_path: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, MINIMAL), {"GEMINI_API_KEY": "test-key"})
    spec = loaded.spec
    assert spec.source.files is not None
    assert spec.source.files.path == str(tmp_path / "in")
    assert spec.sinks.outputs.path == str(tmp_path / "out" / "answers")
    assert spec.parallelism == 1 and spec.checkpointing.backend == "hashmap"
    assert loaded.model.options == {"api_key": "test-key"}


def test_unknown_key_names_file_line_field_and_suggests_the_nearest_key(tmp_path: Path) -> None:
    text = MINIMAL.replace("key: customer.id", "key: customer.id\nparalelism: 2")
    message = problems(write_spec(tmp_path, text))
    assert f"{tmp_path / 'job.yaml'}:5: paralelism: unknown key 'paralelism'" in message
    assert "did you mean 'parallelism'?" in message


def test_nested_typo_is_located_inside_its_block(tmp_path: Path) -> None:
    text = MINIMAL.replace("files: {path: in}", "files:\n    path: in\n    watch_intervall_s: 5")
    message = problems(write_spec(tmp_path, text))
    assert ":5: source.files.watch_intervall_s: unknown key" in message
    assert "did you mean 'watch_interval_s'?" in message


def test_wrong_type_says_what_was_expected_and_what_was_found(tmp_path: Path) -> None:
    message = problems(write_spec(tmp_path, MINIMAL + "parallelism: many\n"))
    assert ":10: parallelism: expected a valid integer" in message
    assert "(got a string)" in message


def test_bad_choice_suggests_the_nearest_valid_value(tmp_path: Path) -> None:
    message = problems(write_spec(tmp_path, MINIMAL.replace("provider: gemini", "provider: gemni")))
    assert ":6: agent.model.provider: expected 'gemini', 'gemini-interactions'" in message
    assert "did you mean 'gemini'?" in message


def test_every_provider_create_model_builds_is_a_spec_provider(tmp_path: Path) -> None:
    assert sorted(PROVIDERS) == sorted(PROVIDER_NAMES)
    for name in PROVIDER_NAMES:
        text = MINIMAL.replace("provider: gemini", f"provider: {name}")
        assert load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "k"}).model.provider == name


def test_an_agent_block_with_only_a_model_has_the_python_api_defaults(tmp_path: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, MINIMAL), {"GEMINI_API_KEY": "test-key"})
    model = model_spec(loaded.model)
    assert agent_config(loaded, model).settings() == AgentConfig(model=model).settings()
    assert loaded.spec.media_store == AgentConfig(model=model).media_store


def test_missing_required_key_names_its_parent_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("  dead_letters: {path: out/dead}\n", "")
    message = problems(write_spec(tmp_path, text))
    assert ":7: sinks.dead_letters: required key 'dead_letters' is missing" in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL + "parallelism: 0\ncheckpointing: {backend: rocks}\n"
    message = problems(write_spec(tmp_path, text))
    assert "parallelism: expected" in message and "checkpointing.backend" in message


def test_source_needs_exactly_one_kind(tmp_path: Path) -> None:
    message = problems(write_spec(tmp_path, MINIMAL.replace("files: {path: in}", "{}")))
    assert "source: expected exactly one of 'files' or 'kafka', got none" in message


def test_missing_secret_is_a_clear_error_naming_the_variable_and_line(tmp_path: Path) -> None:
    message = problems(write_spec(tmp_path, MINIMAL), env={})
    assert ":6: agent.model.options.api_key" in message
    assert "environment variable GEMINI_API_KEY is not set" in message


def test_secret_value_never_appears_in_errors_or_reprs(tmp_path: Path) -> None:
    secret = "sk-very-secret-value-123"
    text = MINIMAL.replace("options: {", "generation: bad, options: {") + "parallelism: ${P}\n"
    env = {"GEMINI_API_KEY": secret, "P": secret}
    message = problems(write_spec(tmp_path, text), env=env)
    assert "parallelism" in message and "agent.model.generation" in message
    assert secret not in message
    loaded = load_spec(write_spec(tmp_path, MINIMAL), env)
    assert secret not in repr(loaded.spec) and secret not in str(loaded.model)
    assert loaded.redact(f"boom {secret}") == "boom ${GEMINI_API_KEY}"


def test_default_syntax_fills_an_unset_variable(tmp_path: Path) -> None:
    text = MINIMAL.replace("path: in}", "path: '${INBOX:-inbox}'}")
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    assert loaded.spec.source.files is not None
    assert loaded.spec.source.files.path == str(tmp_path / "inbox")


def test_first_model_candidate_with_its_secrets_set_is_chosen() -> None:
    assert load_spec(EXAMPLE, {"GEMINI_API_KEY": "g"}).model.provider == "gemini"
    assert load_spec(EXAMPLE, {"OPENAI_API_KEY": "o"}).model.provider == "openai"
    assert load_spec(EXAMPLE, {"GEMINI_API_KEY": ""}).model.provider == "demo"
    demo = load_spec(EXAMPLE, {}).model
    assert demo.provider == "demo"
    spec = model_spec(demo, "http://127.0.0.1:1")
    assert spec.provider == "gemini" and spec.options["api_key"] == DEMO_API_KEY


def test_no_usable_candidate_lists_each_missing_variable(tmp_path: Path) -> None:
    single = MINIMAL.splitlines()[5]
    text = MINIMAL.replace(
        single,
        "  model:\n"
        '    - {provider: gemini, model: g, options: {api_key: "${GEMINI_API_KEY}"}}\n'
        '    - {provider: openai, model: o, options: {api_key: "${OPENAI_API_KEY}"}}\n',
    )
    message = problems(write_spec(tmp_path, text), env={})
    assert "agent.model[0].options.api_key: no model candidate is usable" in message
    assert "OPENAI_API_KEY is not set" in message


def test_demo_model_needs_a_responder(tmp_path: Path) -> None:
    text = MINIMAL.replace("provider: gemini, model: gemini-2.5-flash", "provider: demo, model: d")
    assert "a demo model needs 'responder'" in problems(write_spec(tmp_path, text))


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = problems(write_spec(tmp_path, MINIMAL + "sinks: [unclosed\n"))
    assert "not valid YAML: line" in message


def test_tools_are_imported_and_a_bad_one_is_reported_with_its_line(tmp_path: Path) -> None:
    check_runnable(load_spec(EXAMPLE, {}))
    text = MINIMAL.replace(
        "sinks:",
        "  tools:\n"
        "    - streamagents.jobs.examples.support_tools:lookup_order\n"
        "    - streamagents.jobs.examples.support_tools:lookup_ordr\n"
        "    - no_such_module_here:f\n"
        "sinks:",
    )
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"}))
    message = str(caught.value)
    assert ":9: agent.tools[1]:" in message and "lookup_ordr" in message
    assert ":10: agent.tools[2]:" in message and "no_such_module_here" in message


def test_tools_next_to_the_spec_are_importable(tmp_path: Path) -> None:
    (tmp_path / "my_spec_tools.py").write_text("def ping(x: str) -> str:\n    return x\n")
    text = MINIMAL.replace("sinks:", "  tools: ['my_spec_tools:ping']\nsinks:")
    check_runnable(load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"}))


def test_committed_sample_data_matches_its_generator() -> None:
    for relative, content in sample_files().items():
        assert (DATA_DIR / relative).read_bytes() == content, relative


def test_a_provider_this_installation_lacks_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes the import fail, as a missing SDK would.
    monkeypatch.setitem(sys.modules, "streamagents.connectors.providers.gemini._model", None)
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(write_spec(tmp_path, MINIMAL), {"GEMINI_API_KEY": "test-key"}))
    assert ":6: agent.model.provider: provider 'gemini' is not available" in str(caught.value)


def test_checking_a_spec_imports_only_the_sdk_of_its_provider(tmp_path: Path) -> None:
    """`run`, `validate` and `submit` start faster: a Gemini spec never imports `openai`,
    an OpenAI one never imports `google.genai` (each SDK takes seconds to import)."""
    probe = (
        "import sys\n"
        "from streamagents.jobs.cli import run\n"
        "from streamagents.jobs.spec import check_runnable, load_spec\n"
        "check_runnable(load_spec(sys.argv[1], {'GEMINI_API_KEY': 'k'}))\n"
        "print(sorted(m for m in ('google.genai', 'openai') if m in sys.modules))\n"
    )
    for provider, imported in (("gemini", "['google.genai']"), ("openai", "['openai']")):
        text = MINIMAL.replace("provider: gemini", f"provider: {provider}")
        spec = write_spec(tmp_path, text)
        shown = subprocess.run(
            [sys.executable, "-c", probe, str(spec)], capture_output=True, text=True, check=True
        )
        assert shown.stdout.strip() == imported, (provider, shown.stderr[-2000:])


def test_model_options_the_adapter_refuses_are_reported_with_their_line(tmp_path: Path) -> None:
    for options, expected in (
        ("transport: requests", "options.transport: expected 'aiohttp' or 'httpx'"),
        (
            "max_retrys: 2",
            "options.max_retrys: unknown option 'max_retrys'; did you mean 'max_retries'?",
        ),
    ):
        text = MINIMAL.replace('options: {api_key: "${GEMINI_API_KEY}"}', f"options: {{{options}}}")
        with pytest.raises(SpecError) as caught:
            load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
        assert ":6: agent.model." in str(caught.value)
        assert expected in str(caught.value)
    text = MINIMAL.replace('${GEMINI_API_KEY}"}', '${GEMINI_API_KEY}", transport: httpx}')
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    check_runnable(loaded)
    assert loaded.model.options["transport"] == "httpx"


def test_retry_settings_in_a_spec_reach_the_adapter_and_bad_ones_fail_validate(
    tmp_path: Path,
) -> None:
    retry = "max_retries: 1, retry: {initial_delay_s: 0.1}, retry_budget: {ratio: 0.5}"
    text = MINIMAL.replace('${GEMINI_API_KEY}"}', f'${{GEMINI_API_KEY}}", {retry}}}')
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    check_runnable(loaded)
    model = PROVIDERS["gemini"]("m", **loaded.model.options)
    assert (model.options.max_retries, model.options.retry.initial_delay_s) == (1, 0.1)
    assert model.retry_budget.ratio == 0.5
    for bad, expected in (
        ("retry: {max_retrys: 1}", "options.retry.max_retrys: unknown retry setting 'max_retrys'"),
        ("retry: {jitter: lots}", "options.retry.jitter: expected a valid number"),
        ("retry_budget: 3", "options.retry_budget: expected a valid dictionary"),
        ("retry: {max_retries: 2}", "options.retry: retry.max_retries is no longer a retry"),
    ):
        text = MINIMAL.replace('${GEMINI_API_KEY}"}', f'${{GEMINI_API_KEY}}", {bad}}}')
        with pytest.raises(SpecError) as caught:
            load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
        assert ":6: agent.model." in str(caught.value) and expected in str(caught.value)


def test_retry_options_and_limits_from_yaml_reach_the_running_adapter(tmp_path: Path) -> None:
    """`model.options.retry`/`retry_budget` and `model.limits` go through validate and the
    job's construction (the runtime a subtask builds at 4 subtasks) into the adapter."""
    model = (
        "{provider: gemini, model: m, sdk_process: false, limits: {requests_per_minute: 600, "
        "tokens_per_minute: 80000, max_concurrent: 9}, options: {api_key: "
        '"${GEMINI_API_KEY}", max_retries: 5, retry: {jitter: 0.25}, retry_budget: '
        "{ratio: 0.3, reserve: 4}}}"
    )
    text = MINIMAL.replace(MINIMAL.splitlines()[5].split(": ", 1)[1], model)
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    check_runnable(loaded)
    config = agent_config(loaded, model_spec(loaded.model)).model_copy(update={"subtasks": 4})
    adapter = AgentRuntime.from_config(config).model
    assert (adapter.options.max_retries, adapter.options.retry.jitter) == (5, 0.25)
    assert (adapter.retry_budget.ratio, adapter.retry_budget.reserve) == (0.3, 4)
    assert adapter.admission.limits == RateLimits(
        requests_per_minute=150, tokens_per_minute=20000, max_concurrent=2
    )
    for bad, expected in (
        ("limits: {requests_per_minute: 0}, options: {", "agent.model.limits.requests_per_minute"),
        ("options: {limits: {max_concurrent: 2}, ", "limits goes in the model's `limits`"),
    ):
        wrong = MINIMAL.replace("options: {", bad)
        with pytest.raises(SpecError) as caught:
            check_runnable(load_spec(write_spec(tmp_path, wrong), {"GEMINI_API_KEY": "test-key"}))
        assert expected in str(caught.value)


def test_a_spec_chooses_the_interactions_wire_with_its_store_options(tmp_path: Path) -> None:
    model = (
        "{provider: gemini-interactions, model: gemini-3-pro, sdk_process: true, options: "
        '{api_key: "${GEMINI_API_KEY}", store: true, continue_stored: false, stream: true}}'
    )
    text = MINIMAL.replace(MINIMAL.splitlines()[5].split(": ", 1)[1], model)
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    check_runnable(loaded)
    runtime = AgentRuntime.from_config(agent_config(loaded, model_spec(loaded.model)))
    assert isinstance(runtime.model, SdkProcessModel)  # sdk_process: true
    adapter = runtime.model.model
    assert isinstance(adapter, GeminiInteractionsModel)
    assert (adapter.options.store, adapter.options.continue_stored) == (True, False)
    assert adapter.options.stream is True


def test_an_unset_sdk_process_runs_the_sdk_in_a_worker_where_there_are_two_cores(
    tmp_path: Path,
) -> None:
    unset = load_spec(write_spec(tmp_path, MINIMAL), {"GEMINI_API_KEY": "test-key"})
    assert model_spec(unset.model).sdk_process is None  # settled where the runtime is built
    runtime = AgentRuntime.from_config(agent_config(unset, model_spec(unset.model)))
    assert isinstance(runtime.model, SdkProcessModel) == (usable_cores() >= 2)
    for setting, wrapped in (("true", True), ("false", False)):
        text = MINIMAL.replace(
            '${GEMINI_API_KEY}"}', f'${{GEMINI_API_KEY}}"}}, sdk_process: {setting}'
        )
        chosen = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
        runtime = AgentRuntime.from_config(agent_config(chosen, model_spec(chosen.model)))
        assert isinstance(runtime.model, SdkProcessModel) is wrapped, setting
        adapter = runtime.model.model if wrapped else runtime.model
        assert isinstance(adapter, GeminiChatModel)


def test_the_demo_model_stays_in_process_unless_sdk_process_is_true(tmp_path: Path) -> None:
    demo = MINIMAL.replace(
        "provider: gemini, model: gemini-2.5-flash",
        "provider: demo, model: d, responder: 'streamagents.jobs.examples.demo_responder:respond'",
    )
    for text, wanted in (
        (demo, False),
        (demo.replace("model: d,", "model: d, sdk_process: true,"), True),
    ):
        entry = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"}).model
        assert model_spec(entry, demo_url="http://127.0.0.1:9").sdk_process is wanted


def test_the_tool_result_limit_reaches_the_agents_tools(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        '"${GEMINI_API_KEY}"}}', '"${GEMINI_API_KEY}"}}\n  max_tool_result_bytes: 4096'
    )
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    config = agent_config(loaded, model_spec(loaded.model))
    assert config.max_tool_result_bytes == 4096
    assert AgentRuntime.from_config(config).tools.max_result_bytes == 4096
    message = problems(write_spec(tmp_path, text.replace("4096", "0")))
    assert "agent.max_tool_result_bytes" in message


def test_input_limits_are_set_in_the_agent_section_and_validated(tmp_path: Path) -> None:
    limits = "\n  input_limits: {max_line_bytes: 1048576, max_key_chars: 64}"
    text = MINIMAL.replace('"${GEMINI_API_KEY}"}}', '"${GEMINI_API_KEY}"}}' + limits)
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    config = agent_config(loaded, model_spec(loaded.model))
    assert config.input_limits == InputLimits(max_line_bytes=1048576, max_key_chars=64)
    message = problems(write_spec(tmp_path, text.replace("max_key_chars: 64", "max_key_chars: 0")))
    assert "agent.input_limits.max_key_chars" in message and "greater than or equal to 1" in message


def test_kafka_property_from_the_environment_never_appears_in_the_spec_repr(
    tmp_path: Path,
) -> None:
    secret = "kafka-secret-password-42"
    text = MINIMAL.replace(
        "  files: {path: in}\n",
        "  kafka:\n"
        "    connector_jar: kafka.jar\n"
        "    topics: [tickets]\n"
        "    bootstrap_servers: 127.0.0.1:9092\n"
        "    group_id: agents\n"
        "    properties: {sasl.jaas.config: 'password=\"${KAFKA_PASSWORD}\";'}\n",
    )
    loaded = load_spec(
        write_spec(tmp_path, text), {"GEMINI_API_KEY": "k", "KAFKA_PASSWORD": secret}
    )
    kafka = loaded.spec.source.kafka
    assert kafka is not None and secret in kafka.properties["sasl.jaas.config"]
    for shown in (repr(loaded.spec), str(loaded.spec), repr(kafka)):
        assert secret not in shown
        assert "sasl.jaas.config" in shown and "127.0.0.1:9092" in shown


def test_checkpoint_settings_reach_flink_unaligned_by_default(tmp_path: Path) -> None:
    env = {"GEMINI_API_KEY": "test-key"}
    default = flink_configuration(load_spec(write_spec(tmp_path, MINIMAL), env).spec)
    assert default.get_string("execution.checkpointing.unaligned.enabled", "") == "true"
    assert default.get_string("execution.checkpointing.during-recovery.enabled", "") == "true"
    assert default.get_string(BUFFER_DEBLOAT, "") == "true"
    assert default.get_string("execution.checkpointing.timeout", "") == "600000 ms"
    tuned = MINIMAL + "checkpointing: {interval_s: 2, unaligned: false, timeout_s: 30}\n"
    config = flink_configuration(load_spec(write_spec(tmp_path, tuned), env).spec)
    assert config.get_string("execution.checkpointing.unaligned.enabled", "") == "false"
    assert config.get_string("execution.checkpointing.during-recovery.enabled", "") == "false"
    assert config.get_string("execution.checkpointing.timeout", "") == "30000 ms"
    assert config.get_string("execution.checkpointing.interval", "") == "2000 ms"


def test_checkpoint_timeout_and_waiting_bound_must_be_positive(tmp_path: Path) -> None:
    text = MINIMAL.replace("agent:\n", "agent:\n  max_waiting_inputs: 0\n")
    message = problems(write_spec(tmp_path, text + "checkpointing: {timeout_s: 0}\n"))
    assert "agent.max_waiting_inputs: expected greater than or equal to 1" in message
    assert "checkpointing.timeout_s: expected greater than 0" in message
    loaded = load_spec(
        write_spec(tmp_path, MINIMAL.replace("agent:\n", "agent:\n  max_waiting_inputs: 9\n")),
        {"GEMINI_API_KEY": "test-key"},
    )
    assert agent_config(loaded, model_spec(loaded.model)).max_waiting_inputs == 9


def test_checkpoint_durations_refuse_infinity_nan_and_more_than_a_year(tmp_path: Path) -> None:
    for value in (".inf", ".nan", "1e300"):
        text = MINIMAL + f"checkpointing: {{timeout_s: {value}, interval_s: {value}}}\n"
        message = problems(write_spec(tmp_path, text))
        assert "checkpointing.timeout_s" in message, value
        assert "checkpointing.interval_s" in message, value


GEMINI_EXTRAS = """\
  builtin_tools: {google_search: true, url_context: true}
  context_cache: {enabled: true, ttl_s: 600, min_tokens: 4096}
  documents: [manual.pdf, "https://example.org/policy.txt"]
"""


def test_gemini_extras_reach_the_agent_config_with_documents_relative_to_the_spec(
    tmp_path: Path,
) -> None:
    text = MINIMAL.replace("sinks:", GEMINI_EXTRAS + "sinks:")
    loaded = load_spec(write_spec(tmp_path, text), {"GEMINI_API_KEY": "test-key"})
    config = agent_config(loaded, model_spec(loaded.model))
    assert config.builtin_tools.enabled() == ("google_search", "url_context")
    assert (config.context_cache.enabled, config.context_cache.ttl_s) == (True, 600)
    assert config.documents == [str(tmp_path / "manual.pdf"), "https://example.org/policy.txt"]


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
def test_builtin_tools_on_an_openai_provider_is_a_validate_error_naming_both(
    tmp_path: Path, provider: str
) -> None:
    text = MINIMAL.replace("provider: gemini", f"provider: {provider}").replace(
        "sinks:", GEMINI_EXTRAS + "sinks:"
    )
    message = problems(write_spec(tmp_path, text))
    assert ":7: agent.builtin_tools: built-in server tools (google_search, url_context)" in message
    assert f"model provider '{provider}' has none" in message
    assert ":8: agent.context_cache: explicit context caching" in message


def test_an_sdk_process_that_is_not_a_boolean_is_refused_naming_its_line(tmp_path: Path) -> None:
    for value in ("maybe", "[true]", "{a: 1}", ".nan"):
        text = MINIMAL.replace(
            "model: gemini-2.5-flash,", f"model: gemini-2.5-flash, sdk_process: {value},"
        )
        message = problems(write_spec(tmp_path, text))
        assert ":6: agent.model.sdk_process:" in message, message
