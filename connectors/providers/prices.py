"""The published prices of the Gemini and OpenAI models the documentation names, as data.

Prices are US dollars per million tokens, standard (not batch, not priority) tier, paid
Gemini Developer API and OpenAI API, read on `PRICES_DATE` from the sources below. A
spec overrides them per model (`agent.model.prices`); a model that is neither here nor
overridden has no known cost (null), never a guessed one.

Sources, by figure:

- Gemini (https://ai.google.dev/gemini-api/docs/pricing, the "Gemini Developer API
  pricing" page, as transcribed on 2026-07-04 and 2026-09-20 by third-party price trackers
  that quote it): `gemini-2.5-flash` input $0.30 (text/image/video), output $2.50 (thinking
  included), context caching $0.03; `gemini-2.5-pro` $1.25 / $0.125 / $10.00 up to 200k
  prompt tokens, $2.50 / $0.25 / $15.00 above; `gemini-3-flash-preview` $0.50 / $0.05 /
  $3.00; `gemini-3-pro-preview` $2.00 / $0.20 / $12.00 up to 200k, $4.00 / $0.40 / $18.00
  above. Audio input costs more on Gemini ($1.00 on 2.5 Flash and 3 Flash): the providers
  report no audio token count apart, so audio is priced at the text rate here.
- OpenAI (https://openai.com/api/pricing, standard tier, as quoted by price trackers
  checked 2026-06-21): `gpt-4.1-mini` input $0.40, cached input $0.10, output $1.60;
  `gpt-4.1` $2.00 / $0.50 / $8.00.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from streamagents.serde.chat import TokenUsage

__all__ = ["PRICES", "PRICES_DATE", "PRICES_SOURCES", "ModelPrices", "published_prices"]

PRICES_DATE = "2026-12-02"
"""When the table was last checked against its sources."""

PRICES_SOURCES = ("https://ai.google.dev/gemini-api/docs/pricing", "https://openai.com/api/pricing")
"""Where the figures come from (see the module docstring for each figure)."""

LONG_PROMPT_TOKENS = 200_000
"""Above this many prompt tokens, Gemini's Pro models bill at their long-prompt rates."""


class ModelPrices(BaseModel):
    """A model's price per million tokens: input, input read from a cache, output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_million: float = Field(ge=0, allow_inf_nan=False, description="Prompt tokens.")
    cached_input_per_million: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Prompt tokens read from a cache; unset: the input price.",
    )
    output_per_million: float = Field(
        ge=0, allow_inf_nan=False, description="Completion tokens, thinking included."
    )
    long_prompt: ModelPrices | None = Field(
        default=None,
        description=f"The rates of a call whose prompt is over {LONG_PROMPT_TOKENS:,} tokens, "
        "when the model bills those differently.",
    )

    def cost_usd(self, usage: TokenUsage) -> float:
        """What a call with `usage` costs, in US dollars."""
        if self.long_prompt is not None and usage.input_tokens > LONG_PROMPT_TOKENS:
            return self.long_prompt.cost_usd(usage)
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_rate = self.cached_input_per_million
        per_million = (
            (usage.input_tokens - cached) * self.input_per_million
            + cached * (self.input_per_million if cached_rate is None else cached_rate)
            + usage.output_tokens * self.output_per_million
        )
        return per_million / 1_000_000


def _prices(
    input_: float, cached: float, output: float, long_prompt: ModelPrices | None = None
) -> ModelPrices:
    return ModelPrices(
        input_per_million=input_,
        cached_input_per_million=cached,
        output_per_million=output,
        long_prompt=long_prompt,
    )


PRICES: dict[str, ModelPrices] = {
    "gemini-2.5-flash": _prices(0.30, 0.03, 2.50),
    "gemini-2.5-pro": _prices(1.25, 0.125, 10.00, _prices(2.50, 0.25, 15.00)),
    "gemini-3-flash-preview": _prices(0.50, 0.05, 3.00),
    "gemini-3-pro-preview": _prices(2.00, 0.20, 12.00, _prices(4.00, 0.40, 18.00)),
    "gpt-4.1-mini": _prices(0.40, 0.10, 1.60),
    "gpt-4.1": _prices(2.00, 0.50, 8.00),
}
"""The published prices, by the model name the provider uses."""


def published_prices(model: str) -> ModelPrices | None:
    """The table's prices of `model` as a provider names it: exactly (`models/` aside), or
    a dated or numbered snapshot of a listed name (`gpt-4.1-mini-2025-04-14`,
    `gemini-2.5-flash-001`); None when the table has none (`gemini-2.5-flash-lite` is
    another model, not a snapshot of `gemini-2.5-flash`)."""
    name = model.removeprefix("models/")
    found = PRICES.get(name)
    if found is not None:
        return found
    words = name.split("-")
    for cut in range(len(words) - 1, 0, -1):
        if words[cut][:1].isdigit() and "-".join(words[:cut]) in PRICES:
            return PRICES["-".join(words[:cut])]
    return None
