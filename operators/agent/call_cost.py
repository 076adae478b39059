"""What a model call cost: priced by the model that answered, at the spec's prices for it
or the published table's, and unknown (None) when neither has the model."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from streamagents.connectors.providers.prices import published_prices
from streamagents.operators.agent.config import ModelSpec, ModelTarget
from streamagents.serde.chat import ChatResponse

__all__ = ["answering_model", "call_cost_usd", "run_cost_usd", "unpriced_models"]

_log = logging.getLogger(__name__)
_UNPRICED: set[str] = set()  # models already said to have no price (one log line each)


def answering_model(spec: ModelSpec, response: ChatResponse) -> ModelTarget:
    """The member of the spec's chain that answered `response` (the first model when the
    reply does not say: no fallbacks)."""
    if response.answered_by is not None:
        for target in spec.chain():
            if target.name == response.answered_by.name:
                return target
    return spec


def unpriced_models(spec: ModelSpec) -> list[str]:
    """The models of the spec's chain with no price: none set in the spec, and their
    configured name not in the published table (their calls' cost would be unknown)."""
    return [
        target.model
        for target in spec.chain()
        if target.prices is None and published_prices(target.model) is None
    ]


def call_cost_usd(spec: ModelSpec, response: ChatResponse) -> float | None:
    """What the call that got `response` cost in US dollars, at the answering model's spec
    prices or the published ones for the name it reports (else its configured name); None
    when neither has the model (said once per model in the log, never guessed)."""
    member = answering_model(spec, response)
    model = response.model_version or member.model
    prices = member.prices or published_prices(model) or published_prices(member.model)
    if prices is None:
        if model not in _UNPRICED:
            _UNPRICED.add(model)
            _log.warning(
                "model %r has no price in the published table and the spec sets none "
                "(agent.model.prices): its calls' cost is unknown (null) and counts nothing "
                "against cost budgets",
                model,
            )
        return None
    return prices.cost_usd(response.usage)


def run_cost_usd(call_costs: Sequence[float | None]) -> float | None:
    """A run's cost: the sum of its calls' costs, None when any of them is unknown."""
    if any(cost is None for cost in call_costs):
        return None
    return sum(cost for cost in call_costs if cost is not None)
