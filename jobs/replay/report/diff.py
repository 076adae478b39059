"""The comparison of two run sets: per input, whether the candidate differs and how.

Inputs are paired by (key, input id). For each pair the difference kinds are:

- `answer_changed`: both runs ended well and their answers' text differs (whitespace runs
  count as one space);
- `tool_path_diverged`: the tool calls differ — another tool, other arguments (compared
  as parsed JSON, so key order and spacing do not count), another order or number;
- `new_error`: the recorded run ended well and the candidate's failed (or did not end);
- `fixed_error`: the recorded run failed and the candidate's ended well;
- `error_changed`: both failed, with different error kinds;
- `missing`: one side has no run for the input.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from streamagents.jobs.replay.report.runs import RunKey, RunOutcome, RunSet

__all__ = ["DIFFERENCE_KINDS", "Comparison", "InputComparison", "JudgeVerdict", "compare"]

DifferenceKind = Literal[
    "answer_changed", "tool_path_diverged", "new_error", "fixed_error", "error_changed", "missing"
]
DIFFERENCE_KINDS: tuple[DifferenceKind, ...] = (
    "answer_changed",
    "tool_path_diverged",
    "new_error",
    "fixed_error",
    "error_changed",
    "missing",
)
"""Every kind of difference, in the order reports list them."""


@dataclass(frozen=True)
class JudgeVerdict:
    """A judge's pairwise preference for one input, both orders asked."""

    preferred: Literal["recorded", "candidate", "tie"] | None
    """The side preferred in both orders; tie when the orders disagree; None: it failed."""
    flipped: bool = False
    """The preference changed with the order (position bias): counted as a tie."""
    reasons: tuple[str, ...] = ()
    """The judge's reason in each order (recorded shown first, then candidate first)."""
    error: str | None = None
    """Why judging this input failed (the other inputs are judged regardless)."""


@dataclass(frozen=True)
class InputComparison:
    """One input: the recorded run beside the candidate's, and how they differ."""

    key: str
    input_id: str
    recorded: RunOutcome | None
    candidate: RunOutcome | None
    differences: tuple[DifferenceKind, ...]
    verdict: JudgeVerdict | None = None

    @property
    def divergence(self) -> float:
        """How far apart the two runs are: one per difference, plus how unalike the
        answers' texts are (0 to 1) when the answer changed."""
        score = float(len(self.differences))
        if "answer_changed" in self.differences and self.recorded and self.candidate:
            matcher = difflib.SequenceMatcher(None, self.recorded.text, self.candidate.text)
            score += 1.0 - matcher.quick_ratio()
        return score


@dataclass(frozen=True)
class Comparison:
    """Every input of either side, compared, in key then input-id order."""

    inputs: tuple[InputComparison, ...] = field(default_factory=tuple)
    judged: bool = False
    """Whether a judge was asked about the inputs both sides ran."""

    def with_verdicts(self, verdicts: Mapping[RunKey, JudgeVerdict]) -> Comparison:
        """This comparison with the judge's verdicts attached to their inputs."""
        inputs = tuple(
            replace(item, verdict=verdicts.get((item.key, item.input_id))) for item in self.inputs
        )
        return Comparison(inputs, judged=True)


def _same_text(a: str, b: str) -> bool:
    """Whether two answers say the same, runs of whitespace counting as one space."""
    return a.split() == b.split()


def _tool_path(run: RunOutcome) -> list[tuple[str, str]]:
    """The run's tool calls in order, each its name and its arguments as canonical JSON."""
    return [(c.name, json.dumps(c.arguments, sort_keys=True)) for c in run.tool_calls]


def differences(recorded: RunOutcome | None, candidate: RunOutcome | None) -> list[DifferenceKind]:
    """How the candidate's run of an input differs from the recorded one."""
    if recorded is None or candidate is None:
        return ["missing"]
    found: list[DifferenceKind] = []
    ok_before, ok_now = recorded.status == "ok", candidate.status == "ok"
    if ok_before and ok_now and not _same_text(recorded.text, candidate.text):
        found.append("answer_changed")
    if _tool_path(recorded) != _tool_path(candidate):
        found.append("tool_path_diverged")
    if ok_before and not ok_now:
        found.append("new_error")
    if ok_now and not ok_before:
        found.append("fixed_error")
    if not ok_before and not ok_now and recorded.error_kind != candidate.error_kind:
        found.append("error_changed")
    return found


def compare(
    recorded: RunSet | Mapping[RunKey, RunOutcome], candidate: RunSet | Mapping[RunKey, RunOutcome]
) -> Comparison:
    """Each input of either side (by key and input id) with its difference kinds."""
    if isinstance(recorded, RunSet):
        recorded = recorded.runs
    if isinstance(candidate, RunSet):
        candidate = candidate.runs
    places = sorted(recorded.keys() | candidate.keys())
    return Comparison(
        tuple(
            InputComparison(
                key,
                input_id,
                recorded.get((key, input_id)),
                candidate.get((key, input_id)),
                tuple(differences(recorded.get((key, input_id)), candidate.get((key, input_id)))),
            )
            for key, input_id in places
        )
    )
