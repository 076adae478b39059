"""The YAML spec's spend settings (`agent.model.prices`, `agent.budgets.per_key`,
`agent.budgets.per_tenant`): reaching the agent config, and refused values."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import SpecError, check_runnable, load_spec

BASE = """\
name: tenants
source:
  files: {path: in}
key: customer.id
agent:
  model:
    provider: gemini
    model: gemini-2.5-flash
    options: {api_key: test-key}
    prices: {input_per_million: 0.3, cached_input_per_million: 0.03, output_per_million: 2.5}
  budgets:
    per_key: {tokens: 200000, window_s: 3600}
    per_tenant: {field: tenant, cost: 50.0, window_s: 86400, on_exceeded: defer}
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""


def test_spend_settings_reach_the_agent_config(tmp_path: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, BASE), {})
    check_runnable(loaded)
    config = agent_config(loaded, model_spec(loaded.model))
    prices = config.model.prices
    assert prices is not None and prices.cached_input_per_million == 0.03
    per_key, per_tenant = config.budgets.per_key, config.budgets.per_tenant
    assert per_key is not None and (per_key.tokens, per_key.cost) == (200000, None)
    assert (per_key.window_s, per_key.on_exceeded) == (3600, "dead_letter")
    assert per_tenant is not None and (per_tenant.field, per_tenant.cost) == ("tenant", 50.0)
    assert per_tenant.on_exceeded == "defer"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("tokens: 200000, ", ""), "a spend budget needs tokens, cost or both"),
        (("window_s: 3600", "window_s: 0"), "window_s"),
        (("on_exceeded: defer", "on_exceeded: wait"), "on_exceeded"),
        (("cost: 50.0", "cost: -1"), "cost"),
        (("field: tenant, ", ""), "field"),
        (("output_per_million: 2.5", "output_per_million: .nan"), "output_per_million"),
    ],
)
def test_bad_spend_settings_are_refused_with_their_field(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(write_spec(tmp_path, BASE.replace(*change)), {}))
    message = str(caught.value)
    assert expected in message and "job.yaml:" in message
