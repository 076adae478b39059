"""The YAML spec's approval settings: tool entries, timeouts, the approvals source and sink."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import SpecError, check_runnable, kafka_parts, load_spec
from streamagents.operators.agent import AgentRuntime
from streamagents.operators.agent.config import ToolRef

BASE = """\
name: desk
source:
  files: {path: in, watch_interval_s: 1}
key: customer.id
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: test-key}}
  approval_timeout_s: 3600
  tools:
    - streamagents.jobs.examples.support_tools:lookup_order
    - {ref: "streamagents.jobs.examples.support_tools:refund", approval: required,
       approval_timeout_s: 600}
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
  approval_requests: {path: out/approvals}
approvals:
  files: {path: decisions, watch_interval_s: 1}
"""


def problems(path: Path) -> str:
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(path, {}))
    return str(caught.value)


def test_tool_entries_with_approval_reach_the_agent_config(tmp_path: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, BASE), {})
    check_runnable(loaded)
    spec = loaded.spec
    assert spec.sinks.approval_requests is not None
    assert spec.approvals is not None and spec.approvals.files is not None
    assert spec.approvals.files.path == str(tmp_path / "decisions")
    config = agent_config(loaded, model_spec(loaded.model))
    assert config.approval_timeout_s == 3600
    assert config.tools[1] == ToolRef(
        ref="streamagents.jobs.examples.support_tools:refund",
        approval="required",
        approval_timeout_s=600,
    )
    tools = AgentRuntime.from_config(config).tools
    refund, lookup = tools.get("refund"), tools.get("lookup_order")
    assert refund is not None and refund.needs_approval({"order_id": "A1", "amount_eur": 1})
    assert refund.approval_timeout_s == 600
    assert lookup is not None and not lookup.needs_approval({"order_id": "A1"})


def test_a_tool_needing_approval_without_a_request_sink_is_refused(tmp_path: Path) -> None:
    text = BASE.replace("  approval_requests: {path: out/approvals}\n", "").replace(
        "approvals:\n  files: {path: decisions, watch_interval_s: 1}\n", ""
    )
    message = problems(write_spec(tmp_path, text))
    assert "needs approval, but sinks.approval_requests is not set" in message


def test_a_tool_declaring_approval_in_python_needs_the_request_sink(tmp_path: Path) -> None:
    text = (
        BASE.replace("  approval_requests: {path: out/approvals}\n", "")
        .replace("approvals:\n  files: {path: decisions, watch_interval_s: 1}\n", "")
        .replace(
            '    - {ref: "streamagents.jobs.examples.support_tools:refund", approval: required,\n'
            "       approval_timeout_s: 600}\n",
            "    - streamagents.jobs.examples.support_tools:refund\n",
        )
    )
    message = problems(write_spec(tmp_path, text))
    assert "job.yaml:10: agent.tools[1]: tool 'refund' declares that its calls need approval" in (
        message
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("approval: required", "approval: maybe"), "approval"),
        (("approval_timeout_s: 600", "approval_timeout_s: -1"), "greater than 0"),
        (("approval_timeout_s: 3600", "approval_timeout_s: .inf"), "approval_timeout_s"),
        (("approval: required,", "approval: none,"), "applies only to a tool whose calls"),
        (("ref: ", "reff: "), "reff"),
        (("  approval_timeout_s: 3600", "  while_parked: parallel"), "while_parked"),
        (("  approval_timeout_s: 3600", "  max_inputs_per_parked_key: 0"), "greater than"),
    ],
)
def test_bad_approval_settings_are_refused_with_their_field(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    message = problems(write_spec(tmp_path, BASE.replace(*change)))
    assert expected in message and "job.yaml:" in message


def test_while_parked_settings_reach_the_agent_config(tmp_path: Path) -> None:
    text = BASE.replace(
        "  approval_timeout_s: 3600\n",
        "  while_parked: separate_run\n  max_inputs_per_parked_key: 4\n",
    )
    loaded = load_spec(write_spec(tmp_path, text), {})
    check_runnable(loaded)
    config = agent_config(loaded, model_spec(loaded.model))
    assert (config.while_parked, config.max_inputs_per_parked_key) == ("separate_run", 4)


def test_while_parked_on_an_agent_without_approvals_is_refused(tmp_path: Path) -> None:
    text = (
        BASE.replace("approval: required,", "approval: none,")
        .replace("       approval_timeout_s: 600}", "       }")
        .replace("  approval_timeout_s: 3600\n", "  while_parked: separate_run\n")
    )
    message = problems(write_spec(tmp_path, text))
    assert "job.yaml:7: agent.while_parked: while_parked applies to runs parked" in message
    assert "max_inputs_per_parked_key" not in message


def test_approvals_without_a_request_sink_are_refused(tmp_path: Path) -> None:
    text = (
        BASE.replace("  approval_requests: {path: out/approvals}\n", "")
        .replace("approval: required,", "approval: none,")
        .replace("       approval_timeout_s: 600}", "       }")
    )
    message = problems(write_spec(tmp_path, text))
    assert "approvals is set, but sinks.approval_requests is not set" in message


def test_kafka_approvals_and_request_sink_count_as_kafka_parts(tmp_path: Path) -> None:
    text = BASE.replace(
        "approvals:\n  files: {path: decisions, watch_interval_s: 1}\n",
        "approvals:\n  kafka: {topics: [decisions], bootstrap_servers: 'h:9', group_id: g}\n",
    ).replace(
        "approval_requests: {path: out/approvals}",
        "approval_requests: {kafka: {topic: asks, bootstrap_servers: 'h:9'}}",
    )
    parts = kafka_parts(load_spec(write_spec(tmp_path, text), {}).spec)
    assert ("approvals", "kafka") in parts
    assert ("sinks", "approval_requests", "kafka") in parts


def test_approvals_on_an_input_read_once_are_refused_naming_the_fix(tmp_path: Path) -> None:
    text = BASE.replace("files: {path: in, watch_interval_s: 1}", "files: {path: in}")
    message = problems(write_spec(tmp_path, text))
    assert "job.yaml:3: source.files: runs wait for approvals (a tool needs approval)" in message
    assert "ApprovalPending" in message and "set source.files.watch_interval_s" in message


def test_decisions_read_once_are_refused_naming_the_fix(tmp_path: Path) -> None:
    text = BASE.replace("files: {path: decisions, watch_interval_s: 1}", "files: {path: d}")
    message = problems(write_spec(tmp_path, text))
    assert "approvals.files: decisions are read once" in message
    assert "set approvals.files.watch_interval_s" in message
    assert "source.files" not in message  # the input itself is watched
