"""The summary of a comparison: counts and rates per difference kind, token, cost and
latency deltas, judge results and the keys that diverge most."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from streamagents.jobs.replay.report.diff import DIFFERENCE_KINDS, Comparison

__all__ = ["WORST_KEYS", "summarize"]

WORST_KEYS = 10
"""How many of the most diverging keys a summary lists."""


def _percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of `values` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _deltas(recorded: list[float], candidate: list[float]) -> dict[str, Any]:
    """Totals of both sides and the per-input deltas' median and p95 (candidate minus
    recorded, over the inputs both sides ran)."""
    deltas = [c - r for r, c in zip(recorded, candidate, strict=True)]
    return {
        "recorded_total": sum(recorded),
        "candidate_total": sum(candidate),
        "delta_total": sum(candidate) - sum(recorded),
        "delta_median": _percentile(deltas, 0.5),
        "delta_p95": _percentile(deltas, 0.95),
        "recorded_median": _percentile(recorded, 0.5),
        "candidate_median": _percentile(candidate, 0.5),
        "recorded_p95": _percentile(recorded, 0.95),
        "candidate_p95": _percentile(candidate, 0.95),
    }


def _rate(count: int, total: int) -> float:
    """`count` of `total`, 0 when there are none."""
    return count / total if total else 0.0


def summarize(comparison: Comparison) -> dict[str, Any]:
    """The comparison in figures, as `summary.json` holds them.

    Rates of `missing` are over every input; the other kinds' over the inputs both sides
    ran (`compared`); judge rates over the inputs judged without failure."""
    items = comparison.inputs
    both = [i for i in items if i.recorded is not None and i.candidate is not None]
    counts = {kind: sum(kind in i.differences for i in items) for kind in DIFFERENCE_KINDS}
    rates = {
        kind: _rate(count, len(items) if kind == "missing" else len(both))
        for kind, count in counts.items()
    }
    pairs = [(i.recorded, i.candidate) for i in both if i.recorded and i.candidate]
    priced = [(r, c) for r, c in pairs if r.cost_usd is not None and c.cost_usd is not None]
    by_key: dict[str, list[float]] = defaultdict(list)
    for item in items:
        by_key[item.key].append(item.divergence)
    worst = sorted(
        ((key, sum(scores), sum(s > 0 for s in scores)) for key, scores in by_key.items()),
        key=lambda row: (-row[1], row[0]),
    )
    summary: dict[str, Any] = {
        "inputs": len(items),
        "compared": len(both),
        "recorded_only": sum(i.candidate is None for i in items),
        "candidate_only": sum(i.recorded is None for i in items),
        "differing": sum(bool(i.differences) for i in items),
        "counts": counts,
        "rates": rates,
        "tokens": _deltas([r.tokens for r, _ in pairs], [c.tokens for _, c in pairs]),
        "latency_ms": _deltas([r.latency_ms for r, _ in pairs], [c.latency_ms for _, c in pairs]),
        "cost_usd": {
            "priced_inputs": len(priced),
            **_deltas(
                [r.cost_usd or 0.0 for r, _ in priced], [c.cost_usd or 0.0 for _, c in priced]
            ),
        },
        "worst_keys": [
            {"key": key, "divergence": round(score, 4), "differing_inputs": n}
            for key, score, n in worst[:WORST_KEYS]
            if score > 0
        ],
    }
    if comparison.judged:
        verdicts = [i.verdict for i in both if i.verdict is not None]
        decided = [v for v in verdicts if v.preferred is not None]
        judge = {
            "judged": len(decided),
            "wins": sum(v.preferred == "candidate" for v in decided),
            "losses": sum(v.preferred == "recorded" for v in decided),
            "ties": sum(v.preferred == "tie" for v in decided),
            "flipped": sum(v.flipped for v in decided),
            "failures": sum(v.preferred is None for v in verdicts),
        }
        judge["rates"] = {
            name: _rate(judge[name], len(decided)) for name in ("wins", "losses", "ties")
        }
        summary["judge"] = judge
    return summary
