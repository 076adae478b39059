"""The report's files and the one call that makes them: `comparison.jsonl` (one line per
input), `summary.json` and `report.html`, then the gates' verdict as an exit code."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from streamagents.connectors.providers import ChatModel
from streamagents.jobs.replay.report.diff import Comparison, InputComparison, compare
from streamagents.jobs.replay.report.gates import Gate, GateError, check_gates, parse_gate
from streamagents.jobs.replay.report.html import render_report
from streamagents.jobs.replay.report.judge import judge
from streamagents.jobs.replay.report.runs import RunKey, RunOutcome, RunSet, load_runs
from streamagents.jobs.replay.report.summary import summarize
from streamagents.jobs.viewer.page import EMBED_LIMIT_BYTES, MediaSource
from streamagents.serde.messages import MediaPart

__all__ = ["Report", "comparison_line", "run_report", "write_report"]

Paths = Sequence[str | os.PathLike[str]]


@dataclass(frozen=True)
class Report:
    """What `write_report` wrote: the summary and the gates that failed."""

    summary: dict[str, Any]
    failed_gates: list[str]


def _media(parts: Sequence[MediaPart]) -> list[dict[str, Any]]:
    """Media parts as the JSON lines name them: kind, mime type, sha256."""
    return [
        {"kind": p.kind, "mime_type": p.mime_type, "sha256": p.ref.sha256 if p.ref else None}
        for p in parts
    ]


def _run_json(run: RunOutcome | None) -> dict[str, Any] | None:
    """One side's run as a JSON line holds it (None: the side lacks the input)."""
    if run is None:
        return None
    return {
        "run_id": run.run_id,
        "status": run.status,
        "error_kind": run.error_kind,
        "error_message": run.error_message,
        "text": run.text,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in run.tool_calls],
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": run.cost_usd,
        "latency_ms": run.latency_ms,
        "tool_media": _media(run.tool_media),
    }


def comparison_line(item: InputComparison) -> dict[str, Any]:
    """One input as `comparison.jsonl` holds it."""
    seen = item.recorded or item.candidate
    line: dict[str, Any] = {
        "key": item.key,
        "input_id": item.input_id,
        "differences": list(item.differences),
        "divergence": round(item.divergence, 4),
        "input_text": seen.input_text if seen else "",
        "input_media": _media(seen.input_media) if seen else [],
        "recorded": _run_json(item.recorded),
        "candidate": _run_json(item.candidate),
    }
    if item.verdict is not None:
        v = item.verdict
        line["judge"] = {
            "preferred": v.preferred,
            "flipped": v.flipped,
            "reasons": list(v.reasons),
            "error": v.error,
        }
    return line


def write_report(
    comparison: Comparison,
    out_dir: str | os.PathLike[str],
    *,
    gates: Sequence[str | Gate] = (),
    media_root: str | None = None,
    embed_limit_bytes: int = EMBED_LIMIT_BYTES,
) -> Report:
    """Write `comparison.jsonl`, `summary.json` (with the gates checked and failed) and
    `report.html` into `out_dir`; media come from the store at `media_root` only (None: no
    media are shown)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(comparison)
    failed = check_gates(summary, gates)
    summary["gates"] = {
        "checked": [g.text if isinstance(g, Gate) else g for g in gates],
        "failed": failed,
    }
    with open(out / "comparison.jsonl", "w", encoding="utf-8") as lines:
        for item in comparison.inputs:
            lines.write(json.dumps(comparison_line(item), ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    page = out / "report.html"
    media = MediaSource(page, media_root, embed_limit_bytes)
    page.write_text(render_report(comparison, summary, media, failed), encoding="utf-8")
    return Report(summary, failed)


def _warn(side: str, runs: RunSet, err: TextIO) -> None:
    """Print what reading one side's logs found amiss."""
    for damaged in runs.damaged:
        print(f"warning: {side} log: {damaged}", file=err)
    if runs.repeated:
        print(
            f"warning: {side} log: {runs.repeated} inputs ran again; the later run is used",
            file=err,
        )
    if runs.unpaired:
        print(f"warning: {side} log: {runs.unpaired} runs name no input id: left out", file=err)


def _print_summary(summary: dict[str, Any], out: TextIO) -> None:
    """Print the summary's headline figures."""
    counts = ", ".join(f"{kind} {n}" for kind, n in summary["counts"].items())
    print(
        f"{summary['inputs']} inputs, {summary['compared']} on both sides, "
        f"{summary['differing']} differ: {counts}",
        file=out,
    )
    tokens, latency = summary["tokens"], summary["latency_ms"]
    print(
        f"tokens {tokens['recorded_total']:,} -> {tokens['candidate_total']:,}; latency median "
        f"{latency['recorded_median'] or 0:.0f} -> {latency['candidate_median'] or 0:.0f} ms",
        file=out,
    )
    judge = summary.get("judge")
    if judge is not None:
        print(
            f"judge: {judge['wins']} candidate better, {judge['losses']} recorded better, "
            f"{judge['ties']} ties ({judge['flipped']} flipped), {judge['failures']} failed",
            file=out,
        )


def run_report(
    recorded: Paths,
    candidate: Paths,
    out_dir: str | os.PathLike[str],
    *,
    fail_if: Sequence[str] = (),
    judge_with: tuple[ChatModel, str] | None = None,
    media_root: str | None = None,
    embed_limit_bytes: int = EMBED_LIMIT_BYTES,
    only: Collection[RunKey] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Compare two event logs, judge them when `judge_with` (model, rubric) is given, write
    the report into `out_dir` and check the gates: 0 when none fails, 1 when one does, 2 for
    a usage error (a bad gate, a judge gate without a judge, a log path that names nothing).
    With `only`, the recorded side holds just those inputs (the ones a replay ran)."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        gates = [parse_gate(text) for text in fail_if]
        if judge_with is None and any(gate.needs_judge for gate in gates):
            raise GateError("judge_* gates need a judge (--judge-spec or --judge-model)")
        sides = load_runs(recorded), load_runs(candidate)
    except (GateError, FileNotFoundError) as error:
        print(f"streamagents replay-report: {error}", file=err)
        return 2
    _warn("recorded", sides[0], err)
    _warn("candidate", sides[1], err)
    recorded_runs = sides[0].runs
    if only is not None:
        recorded_runs = {pair: run for pair, run in recorded_runs.items() if pair in only}
    comparison = compare(recorded_runs, sides[1].runs)
    if judge_with is not None:
        comparison = judge(comparison, *judge_with)
    report = write_report(
        comparison, out_dir, gates=gates, media_root=media_root, embed_limit_bytes=embed_limit_bytes
    )
    _print_summary(report.summary, out)
    print(f"wrote {Path(out_dir) / 'report.html'}, comparison.jsonl and summary.json", file=out)
    for gate in report.failed_gates:
        print(f"gate failed: {gate}", file=err)
    return 1 if report.failed_gates else 0
