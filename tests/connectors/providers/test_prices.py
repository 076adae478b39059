"""The published price table: which models it prices, and what a call's usage costs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamagents.connectors.providers.prices import (
    LONG_PROMPT_TOKENS,
    PRICES,
    ModelPrices,
    published_prices,
)
from streamagents.serde.chat import TokenUsage


def test_the_table_prices_every_model_the_documentation_names() -> None:
    for model in ("gemini-2.5-flash", "gemini-3-pro-preview", "gemini-3-flash-preview"):
        assert published_prices(model) is PRICES[model]
    assert published_prices("gpt-4.1-mini") is PRICES["gpt-4.1-mini"]


@pytest.mark.parametrize(
    ("reported", "listed"),
    [
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gemini-2.5-flash-001", "gemini-2.5-flash"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
    ],
)
def test_a_dated_snapshot_or_resource_name_has_its_models_prices(
    reported: str, listed: str
) -> None:
    assert published_prices(reported) is PRICES[listed]


@pytest.mark.parametrize("model", ["gemini-2.5-flash-lite", "gpt-4.1-nano", "my-own-model", ""])
def test_another_model_of_a_listed_family_has_no_price_rather_than_a_guessed_one(
    model: str,
) -> None:
    assert published_prices(model) is None


def test_a_call_costs_uncached_input_cached_input_and_output_at_their_rates() -> None:
    prices = PRICES["gpt-4.1-mini"]  # $0.40 input, $0.10 cached, $1.60 output
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    assert prices.cost_usd(usage) == pytest.approx(0.6 * 0.40 + 0.4 * 0.10 + 0.5 * 1.60)


def test_without_a_cached_price_cached_input_costs_the_input_price() -> None:
    prices = ModelPrices(input_per_million=2.0, output_per_million=8.0)
    usage = TokenUsage(input_tokens=1_000_000, cached_tokens=1_000_000)
    assert prices.cost_usd(usage) == pytest.approx(2.0)


def test_a_prompt_over_200k_tokens_costs_the_long_prompt_rates() -> None:
    prices = PRICES["gemini-3-pro-preview"]  # $2 / $12 up to 200k prompt tokens, $4 / $18 above
    short = TokenUsage(input_tokens=LONG_PROMPT_TOKENS, output_tokens=1_000)
    long = TokenUsage(input_tokens=LONG_PROMPT_TOKENS + 1, output_tokens=1_000)
    assert prices.cost_usd(short) == pytest.approx(0.2 * 2.0 + 0.001 * 12.0)
    assert prices.cost_usd(long) == pytest.approx(0.200001 * 4.0 + 0.001 * 18.0)


tokens = st.integers(min_value=0, max_value=10_000_000)


@given(st.sampled_from(sorted(PRICES)), tokens, tokens, tokens)
def test_more_tokens_never_cost_less_and_a_cache_hit_never_costs_more(
    model: str, input_tokens: int, output_tokens: int, cached: int
) -> None:
    prices = PRICES[model]
    cached = min(cached, input_tokens)
    usage = TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens)
    hit = TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached)
    more = TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens + 1)
    assert 0 <= prices.cost_usd(hit) <= prices.cost_usd(usage) + 1e-12
    assert prices.cost_usd(more) > prices.cost_usd(usage)
