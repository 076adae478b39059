"""A cost budget says what it means: over a model with no price (neither in the spec nor in
the published table) its calls would count nothing against it, so `validate` refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.jobs.spec import SpecError, check_runnable, load_spec

SPEC = """\
name: capped
source:
  files: {path: in}
key: customer.id
agent:
  model:
    provider: gemini
    model: MODEL
    options: {api_key: test-key}
    fallbacks:
      - {provider: openai, model: gpt-4.1-mini, options: {api_key: test-key}}
  budgets:
    per_tenant: {field: tenant, cost: 50.0, window_s: 86400}
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""


def test_a_cost_budget_over_an_unpriced_model_is_refused_with_its_line(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC.replace("MODEL", "gemini-2.5-flash-lite"))
    with pytest.raises(SpecError) as refused:
        check_runnable(load_spec(spec, {}))
    message = str(refused.value)
    assert "job.yaml:13: agent.budgets.per_tenant.cost: a cost budget needs prices" in message
    assert "'gemini-2.5-flash-lite' has none" in message


def test_an_unpriced_fallback_is_refused_too(tmp_path: Path) -> None:
    text = SPEC.replace("MODEL", "gemini-2.5-flash").replace("gpt-4.1-mini", "gpt-9-unlisted")
    with pytest.raises(SpecError, match="'gpt-9-unlisted' has none"):
        check_runnable(load_spec(write_spec(tmp_path, text), {}))


def test_prices_in_the_spec_or_the_table_or_a_tokens_budget_pass(tmp_path: Path) -> None:
    priced = SPEC.replace("MODEL", "gemini-2.5-flash-lite").replace(
        "options: {api_key: test-key}\n    fallbacks",
        "options: {api_key: test-key}\n"
        "    prices: {input_per_million: 0.1, output_per_million: 0.4}\n    fallbacks",
    )
    check_runnable(load_spec(write_spec(tmp_path, priced), {}))
    check_runnable(load_spec(write_spec(tmp_path, SPEC.replace("MODEL", "gemini-2.5-flash")), {}))
    tokens = SPEC.replace("MODEL", "gemini-2.5-flash-lite").replace("cost: 50.0", "tokens: 9000")
    check_runnable(load_spec(write_spec(tmp_path, tokens), {}))


def test_the_job_wide_cap_needs_prices_too(tmp_path: Path) -> None:
    text = SPEC.replace("MODEL", "gemini-2.5-flash-lite").replace(
        "per_tenant: {field: tenant, cost: 50.0, window_s: 86400}",
        "per_job: {cost: 500.0, window_s: 86400}",
    )
    with pytest.raises(SpecError, match=r"agent\.budgets\.per_job\.cost: a cost budget needs"):
        check_runnable(load_spec(write_spec(tmp_path, text), {}))
