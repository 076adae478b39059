"""The YAML spec's `agent.followups` settings: reaching the agent config, and refused values."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import SpecError, check_runnable, load_spec
from streamagents.operators.agent import AgentRuntime

BASE = """\
name: watcher
source:
  files: {path: in, watch_interval_s: 1}
key: customer.id
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: test-key}}
  tools:
    - streamagents.jobs.examples.support_tools:lookup_order
  followups: {enabled: true, min_delay_s: 300, max_delay_s: 86400, max_pending: 2,
              cancel_on_input: false}
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""


def test_followup_settings_reach_the_agent_config_and_its_tools(tmp_path: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, BASE), {})
    check_runnable(loaded)
    config = agent_config(loaded, model_spec(loaded.model))
    followups = config.followups
    assert (followups.enabled, followups.min_delay_s, followups.max_delay_s) == (True, 300, 86400)
    assert (followups.max_pending, followups.cancel_on_input) == (2, False)
    runtime = AgentRuntime.from_config(config)
    assert [spec.name for spec in runtime.tool_specs] == ["lookup_order", "schedule_followup"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("min_delay_s: 300", "min_delay_s: 90000"), "min_delay_s=90000 is above max_delay_s"),
        (("max_pending: 2", "max_pending: 0"), "max_pending"),
        (("max_delay_s: 86400", "max_delay_s: .nan"), "max_delay_s"),
        (("max_delay_s: 86400", "max_delay_s: 1e12"), "max_delay_s"),
        (("cancel_on_input", "cancel_on_inputs"), "cancel_on_inputs"),
        (("key: customer.id", "key: id"), "the key field 'id' cannot be under it"),
    ],
)
def test_bad_followup_settings_are_refused_with_their_field(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(write_spec(tmp_path, BASE.replace(*change)), {}))
    message = str(caught.value)
    assert expected in message and "job.yaml:" in message and "followups" in message


def test_followups_on_an_input_read_once_are_refused_naming_the_fix(tmp_path: Path) -> None:
    text = BASE.replace("files: {path: in, watch_interval_s: 1}", "files: {path: in}")
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(write_spec(tmp_path, text), {}))
    message = str(caught.value)
    assert "job.yaml:3: source.files: follow-ups wait for their due time" in message
    assert "FollowupPending" in message and "set source.files.watch_interval_s" in message
    bounded_without = text.replace("enabled: true", "enabled: false")
    check_runnable(load_spec(write_spec(tmp_path, bounded_without), {}))  # nothing waits: fine
