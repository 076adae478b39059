"""`--fail-if` gates: `METRIC OP NUMBER` or `METRIC OP NUMBER%`, checked on a summary.

A metric is a count from the summary (`GATE_METRICS`); with `%` its rate is checked
instead (percent of the inputs both sides ran; `missing` of every input; the judge's of
the inputs judged). OP is one of `>`, `>=`, `<`, `<=`, `==`. Spaces around the parts are
allowed; anything else is a `GateError`, which the command reports as a usage error.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GATE_METRICS", "Gate", "GateError", "check_gates", "parse_gate"]

GATE_METRICS: dict[str, tuple[str, str]] = {
    "changed_answers": ("counts", "answer_changed"),
    "tool_path_diverged": ("counts", "tool_path_diverged"),
    "new_errors": ("counts", "new_error"),
    "fixed_errors": ("counts", "fixed_error"),
    "changed_errors": ("counts", "error_changed"),
    "missing": ("counts", "missing"),
    "judge_losses": ("judge", "losses"),
    "judge_wins": ("judge", "wins"),
    "judge_ties": ("judge", "ties"),
    "judge_failures": ("judge", "failures"),
}
"""Each gate metric and where its count is in the summary."""

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
_GATE = re.compile(r"\s*([a-z_]+)\s*(>=|<=|==|>|<)\s*(\d+(?:\.\d+)?)\s*(%?)\s*")


class GateError(ValueError):
    """A `--fail-if` expression that is not in the gate grammar."""


@dataclass(frozen=True)
class Gate:
    """One parsed `--fail-if` expression."""

    text: str
    metric: str
    op: str
    threshold: float
    percent: bool

    def value(self, summary: Mapping[str, Any]) -> float:
        """The metric's count in `summary`, or its rate in percent for a `%` gate."""
        section, name = GATE_METRICS[self.metric]
        if section == "judge":
            counts = summary.get("judge") or {}
            rates = counts.get("rates", {})
        else:
            counts, rates = summary["counts"], summary["rates"]
        if self.percent:  # rounded, so 11 of 20 is 55% and not 55.00000000000001%
            return round(100.0 * rates.get(name, 0.0), 9)
        return float(counts.get(name, 0))

    @property
    def needs_judge(self) -> bool:
        """Whether the gate reads the judge's results."""
        return GATE_METRICS[self.metric][0] == "judge"

    def holds(self, summary: Mapping[str, Any]) -> bool:
        """Whether the gate's condition holds (the run fails the gate)."""
        return _OPERATORS[self.op](self.value(summary), self.threshold)


def parse_gate(text: str) -> Gate:
    """Parse one expression, e.g. `changed_answers>5%`; a GateError says what is wrong."""
    match = _GATE.fullmatch(text)
    if match is None:
        raise GateError(
            f"--fail-if {text!r}: expected METRIC OP NUMBER[%], e.g. new_errors>0 or "
            "changed_answers>=5%; OP is one of > >= < <= =="
        )
    metric, op, number, percent = match.groups()
    if metric not in GATE_METRICS:
        known = ", ".join(GATE_METRICS)
        raise GateError(f"--fail-if {text!r}: unknown metric {metric!r}; known: {known}")
    threshold = float(number)
    if percent and threshold > 100:
        raise GateError(f"--fail-if {text!r}: a percentage cannot exceed 100")
    return Gate(text.strip(), metric, op, threshold, bool(percent))


def check_gates(summary: Mapping[str, Any], fail_if: Sequence[str | Gate]) -> list[str]:
    """The gates that hold on `summary`, each as `expression (value)`; empty: all passed.

    Expressions are parsed first, so a bad one raises a GateError before any is checked."""
    gates = [g if isinstance(g, Gate) else parse_gate(g) for g in fail_if]
    failed = []
    for gate in gates:
        if gate.holds(summary):
            value = gate.value(summary)
            shown = f"{value:.2f}%" if gate.percent else f"{value:g}"
            failed.append(f"{gate.text} (is {shown})")
    return failed
