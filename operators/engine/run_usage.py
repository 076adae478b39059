"""What a run has used so far, read from its state or its output, for metrics and budgets.

A step's usage is the difference between two snapshots: the run's state before the step
and its state (or, when it finished, its output record) after it. The metrics count that
difference, and the spend budgets charge its tokens and priced dollars.
"""

from __future__ import annotations

from streamagents.operators.agent import RunState
from streamagents.operators.agent.emitted_records import OutputRecord
from streamagents.operators.engine.metrics import UsageTotals
from streamagents.operators.engine.rolling_spend import Spent

__all__ = ["output_usage", "spent", "usage_of"]


def usage_of(state: RunState) -> UsageTotals:
    """The calls, tokens and priced spend a run has used so far, as its state counts them."""
    return UsageTotals(
        state.model_calls,
        state.tool_calls,
        state.input_tokens,
        state.output_tokens,
        state.cached_tokens,
        state.priced_cost_usd,
        state.call_costs_usd.count(None),
    )


def output_usage(output: OutputRecord) -> UsageTotals:
    """The calls, tokens and priced spend a finished run used, as its output record counts
    them."""
    usage = output.usage
    costs = output.call_costs_usd
    return UsageTotals(
        output.model_calls,
        output.tool_calls,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        sum(cost for cost in costs if cost is not None),
        costs.count(None),
    )


def spent(before: UsageTotals, after: UsageTotals) -> Spent:
    """The tokens and priced dollars spent between two usage snapshots of a run."""
    tokens = after.tokens_in + after.tokens_out - before.tokens_in - before.tokens_out
    return Spent(max(0, tokens), max(0.0, after.cost_usd - before.cost_usd))
