"""Retry policy, budget, Retry-After, scrubbing, the status table and `create_model`, offline."""

from __future__ import annotations

import email.utils
import random
import time

import pytest
from pydantic import ValidationError

from streamagents.connectors.providers import (
    BadRequest,
    GeminiChatModel,
    GeminiInteractionsModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ProviderError,
    RateLimited,
    RetryBudget,
    RetryBudgetSettings,
    RetryPolicy,
    ServerError,
    create_model,
)
from streamagents.connectors.providers.errors import error_for_status
from streamagents.connectors.providers.retry import parse_retry_after
from streamagents.serde.safe_text import scrub


def test_backoff_grows_exponentially_within_its_jitter_band_and_cap() -> None:
    policy = RetryPolicy(initial_delay_s=0.5, multiplier=2.0, max_delay_s=3.0, jitter=0.5)
    rng = random.Random(7)
    for retry, ceiling in enumerate([0.5, 1.0, 2.0, 3.0, 3.0]):
        delays = [policy.backoff(retry, rng) for _ in range(200)]
        assert all(ceiling * 0.5 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100  # jittered, not a fixed value


def test_retry_after_is_a_floor_on_the_delay() -> None:
    policy = RetryPolicy(initial_delay_s=0.5, jitter=0.0)
    rng = random.Random(1)
    assert policy.delay(0, 4.0, rng) == 4.0
    assert policy.delay(0, 0.1, rng) == 0.5
    assert policy.delay(0, None, rng) == 0.5


def test_retry_after_waits_are_jittered_so_retries_do_not_return_together() -> None:
    """A hundred calls told Retry-After 10 come back spread over [10, 15] s, not all at 10."""
    policy = RetryPolicy(initial_delay_s=0.5, jitter=0.5)
    rng = random.Random(7)
    delays = [policy.delay(0, 10.0, rng) for _ in range(100)]
    assert min(delays) >= 10.0 and max(delays) <= 15.0
    assert max(delays) - min(delays) > 4.0
    assert sum(1 for d in delays if d < 10.5) < 20  # at most a fifth in the first half second


def test_retry_after_is_read_as_seconds_milliseconds_or_an_http_date() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= (parse_retry_after({"Retry-After": in_ten}) or 0.0) <= 10.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_retry_budget_spends_its_reserve_then_earns_a_share_of_calls() -> None:
    budget = RetryBudget(RetryBudgetSettings(ratio=0.5, reserve=2.0))
    assert budget.try_spend() and budget.try_spend()
    assert not budget.try_spend()
    budget.record_call()
    assert not budget.try_spend()
    budget.record_call()
    assert budget.try_spend()


def test_scrub_removes_secrets_and_base64_runs_and_caps_length() -> None:
    text = "key sk-abc123 rejected; data iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    cleaned = scrub(text, ["sk-abc123", None])
    assert cleaned == "key [redacted] rejected; data [data elided]"
    assert len(scrub("x " * 5000)) < 2100


def test_create_model_builds_each_provider_and_rejects_unknown_names() -> None:
    built = {
        name: create_model(name, "m", api_key="k", base_url="http://127.0.0.1:9")
        for name in ("gemini", "gemini-interactions", "openai", "openai-responses")
    }
    assert isinstance(built["gemini"], GeminiChatModel)
    assert isinstance(built["gemini-interactions"], GeminiInteractionsModel)
    assert isinstance(built["openai"], OpenAIChatModel)
    assert isinstance(built["openai-responses"], OpenAIResponsesModel)
    assert "k" not in repr(built["openai"])
    with pytest.raises(ValueError, match="unknown model provider 'anthropic'"):
        create_model("anthropic", "claude")


def test_retry_options_given_as_mappings_build_the_policy_and_the_budget() -> None:
    model = create_model(
        "openai", "m", api_key="k", retry={"max_delay_s": 5}, retry_budget={"reserve": 2}
    )
    assert model.options.retry == RetryPolicy(max_delay_s=5)
    assert isinstance(model.retry_budget, RetryBudget) and model.retry_budget.reserve == 2
    with pytest.raises(ValidationError, match="unknown retry_budget setting 'size'"):
        create_model("openai", "m", api_key="k", retry_budget={"size": 2})


def test_max_retries_is_one_option_and_the_old_retry_spelling_says_where_it_went() -> None:
    model = create_model("openai", "m", api_key="k", max_retries=0)
    assert model.options.max_retries == 0
    with pytest.raises(ValidationError, match="the model option max_retries"):
        create_model("openai", "m", api_key="k", retry={"max_retries": 2})


def test_a_missing_api_key_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    for provider in ("gemini", "gemini-interactions"):
        with pytest.raises(ValueError, match="GEMINI_API_KEY"):
            create_model(provider, "gemini-3-pro")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        create_model("openai", "gpt-test")
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    assert create_model("gemini", "gemini-3-pro").api_key == "from-env"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("status", "expected", "retryable"),
    [
        (429, RateLimited, True),
        (400, BadRequest, False),
        (404, BadRequest, False),
        (500, ServerError, True),
        (503, ServerError, True),
        (302, ProviderError, False),
        (600, ProviderError, False),
        (None, ProviderError, False),
    ],
)
def test_every_provider_maps_an_http_status_with_one_table(
    status: int | None, expected: type[ProviderError], retryable: bool
) -> None:
    error = error_for_status(status, "nope", provider="any", code="X", retry_after=2.0)
    assert type(error) is expected
    assert error.retryable is retryable
    assert (error.status, error.code, error.retry_after) == (status, "X", 2.0)


@pytest.mark.parametrize(
    "provider", ["gemini", "gemini-interactions", "openai", "openai-responses"]
)
def test_an_unknown_option_is_refused_naming_it(provider: str) -> None:
    with pytest.raises(ValidationError, match="unknown option 'temprature'"):
        create_model(provider, "m", api_key="k", temprature=0.2)
