"""Pairwise judging: a model the user names says, by a rubric, which answer to an input is
better — the recorded one or the candidate's — asked in both orders.

Each input both sides ran and that differs is shown to the judge twice: recorded answer as
A and candidate as B, then the other way round. The judge replies with a JSON object
`{"verdict": "A" | "B" | "tie", "reason": "..."}`. A side preferred in both orders wins;
anything else is a tie, and a preference that follows the position (A both times, or B
both times) is marked `flipped`. Inputs whose runs do not differ are a tie without asking.
A failed call or a reply that is not the JSON asked for is that input's judge error; the
other inputs are judged regardless.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from streamagents.connectors.providers import ChatModel, create_model
from streamagents.jobs.replay.report.diff import Comparison, InputComparison, JudgeVerdict
from streamagents.jobs.replay.report.runs import RunKey, RunOutcome
from streamagents.jobs.spec.yaml_source import load_yaml
from streamagents.operators.agent.config import ModelTarget
from streamagents.serde.messages import ChatMessage
from streamagents.serde.safe_text import clip, redact_secrets, scrub

__all__ = [
    "JUDGE_CONCURRENCY",
    "REASON_CHARS",
    "JudgeSpec",
    "judge",
    "judge_model",
    "load_judge_spec",
]

JUDGE_CONCURRENCY = 4
"""Judge calls in flight at once."""
REASON_CHARS = 1000
"""A judge's reason is kept to this many characters."""

Side = Literal["recorded", "candidate", "tie"]

_INSTRUCTIONS = """You compare two answers an AI agent gave to the same input, A and B, and \
say which is better by the rubric below. Judge the answers, not their position or length.

Rubric:
{rubric}

Reply with only a JSON object, no other text:
{{"verdict": "A" or "B" or "tie", "reason": "one or two sentences"}}"""


class JudgeReplyError(ValueError):
    """The judge's reply is not the JSON object it was asked for."""


class JudgeSpec(BaseModel):
    """A `--judge-spec` file: the judge's model and its rubric (inline or a file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelTarget = Field(description="The judge model: provider, model, options.")
    rubric: str | None = Field(default=None, description="What makes an answer better.")
    rubric_file: str | None = Field(
        default=None, description="A file holding the rubric (relative to the spec)."
    )

    @model_validator(mode="after")
    def _one_rubric(self) -> JudgeSpec:
        """Refuse a spec with no rubric or with both forms of it."""
        if (self.rubric is None) == (self.rubric_file is None):
            raise ValueError("give the rubric either inline (rubric) or as rubric_file")
        return self


def load_judge_spec(path: str | Path) -> tuple[ModelTarget, str]:
    """The judge model and rubric a judge spec file names (`${ENV}` substituted); a
    ValueError says what is wrong with it."""
    source = Path(path)
    loaded = load_yaml(source.read_text(encoding="utf-8"))
    if loaded.missing:
        names = sorted({name for names in loaded.missing.values() for name in names})
        raise ValueError(f"{source}: environment variables not set: {', '.join(names)}")
    try:
        spec = JudgeSpec.model_validate(loaded.data)
    except ValueError as error:  # pydantic's ValidationError; its text may hold a value
        raise ValueError(f"{source}: {loaded.redact(str(error))}") from None
    if spec.rubric is not None:
        return spec.model, spec.rubric
    return spec.model, (source.parent / str(spec.rubric_file)).read_text(encoding="utf-8")


def judge_model(target: ModelTarget) -> ChatModel:
    """The judge's chat model, built as every model is (`create_model`), in this process."""
    return create_model(target.provider, target.model, sdk_process=False, **target.options)


def _side(run: RunOutcome) -> str:
    """One answer as the judge reads it: status, tool calls, text."""
    lines = [f"status: {run.status}" + (f" ({run.error_kind})" if run.error_kind else "")]
    for call in run.tool_calls:
        lines.append(f"tool call: {call.name} {json.dumps(call.arguments, sort_keys=True)}")
    lines.append("answer:\n" + (run.text or "(no answer)"))
    return "\n".join(lines)


def _prompt(first: RunOutcome, second: RunOutcome) -> str:
    """What the judge is asked about one input: the input, then answer A and answer B."""
    seen = first.input_media or second.input_media
    media = f"\n(the input also held {len(seen)} media part(s), not shown here)" if seen else ""
    return (
        f"Input:\n{first.input_text or second.input_text}{media}\n\n"
        f"=== Answer A ===\n{_side(first)}\n\n=== Answer B ===\n{_side(second)}"
    )


def parse_verdict(text: str) -> tuple[Literal["A", "B", "tie"], str]:
    """The verdict and reason of a judge's reply (a JSON object, fenced or not)."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        reply: Any = json.loads(match.group(0)) if match else None
    except json.JSONDecodeError:
        reply = None
    if not isinstance(reply, dict):
        raise JudgeReplyError(f"the judge's reply is not a JSON object: {clip(text, 200)!r}")
    verdict, reason = reply.get("verdict"), reply.get("reason")
    chosen = {"a": "A", "b": "B", "tie": "tie"}.get(str(verdict).strip().lower())
    if chosen is None or not isinstance(reason, str):
        raise JudgeReplyError(
            f'the judge\'s reply needs "verdict" (A, B or tie) and a "reason" string: '
            f"{clip(json.dumps(reply), 200)}"
        )
    return chosen, clip(reason, REASON_CHARS)  # type: ignore[return-value]


def _combine(first: Side, second: Side, reasons: tuple[str, ...]) -> JudgeVerdict:
    """One verdict from the two orders' preferences."""
    if first == second:
        return JudgeVerdict(first, reasons=reasons)
    flipped = "tie" not in (first, second)
    return JudgeVerdict("tie", flipped=flipped, reasons=reasons)


@dataclass
class _Judging:
    """The judge's calls for one comparison, at most `JUDGE_CONCURRENCY` at once."""

    model: ChatModel
    system: ChatMessage
    slots: asyncio.Semaphore

    async def ask(self, a: RunOutcome, b: RunOutcome) -> tuple[str, str]:
        """The verdict and reason of one question: answer `a` shown first, `b` second."""
        messages = [self.system, ChatMessage(role="user", content=_prompt(a, b))]
        async with self.slots:
            response = await self.model.achat(messages)
        return parse_verdict(response.message.content)

    async def verdict(self, item: InputComparison) -> JudgeVerdict:
        """The input's verdict from both orders, or its judge failure."""
        recorded, candidate = item.recorded, item.candidate
        assert recorded is not None and candidate is not None
        if not item.differences:
            return JudgeVerdict("tie", reasons=("the runs do not differ: not asked",))
        try:
            (v1, r1), (v2, r2) = await asyncio.gather(
                self.ask(recorded, candidate), self.ask(candidate, recorded)
            )
        except Exception as error:  # a judge failure is reported per input, never fatal
            text = redact_secrets(scrub(str(error)))
            return JudgeVerdict(None, error=f"{type(error).__name__}: {text}")
        first: Side = {"A": "recorded", "B": "candidate"}.get(v1, "tie")  # type: ignore[assignment]
        second: Side = {"A": "candidate", "B": "recorded"}.get(v2, "tie")  # type: ignore[assignment]
        return _combine(first, second, (r1, r2))


async def _judge_all(
    comparison: Comparison, model: ChatModel, rubric: str
) -> dict[RunKey, JudgeVerdict]:
    """Every verdict of the comparison by input, the model closed at the end."""
    system = ChatMessage(role="system", content=_INSTRUCTIONS.format(rubric=rubric.strip()))
    judging = _Judging(model, system, asyncio.Semaphore(JUDGE_CONCURRENCY))
    both = [i for i in comparison.inputs if i.recorded is not None and i.candidate is not None]
    try:
        verdicts = await asyncio.gather(*(judging.verdict(item) for item in both))
    finally:
        await model.aclose()
    return {(item.key, item.input_id): v for item, v in zip(both, verdicts, strict=True)}


def judge(comparison: Comparison, model: ChatModel, rubric: str) -> Comparison:
    """The comparison with a verdict on every input both sides ran (the model is closed
    when it returns)."""
    return comparison.with_verdicts(asyncio.run(_judge_all(comparison, model, rubric)))
