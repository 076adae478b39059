"""The report page: the summary, the keys that diverge most, and each differing input's
recorded run beside the candidate's, with the media both saw.

Built like the run viewer's page (`streamagents.jobs.viewer.page`), with its helpers: every
text escaped, a Content-Security-Policy that allows no script, media read from the store
by their refs and embedded up to a budget (written next to the page past it).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from streamagents.jobs.replay.report.diff import (
    DIFFERENCE_KINDS,
    Comparison,
    InputComparison,
    JudgeVerdict,
)
from streamagents.jobs.replay.report.runs import RunOutcome
from streamagents.jobs.viewer.page import (
    PAGE_CSP,
    PAGE_STYLE,
    MediaSource,
    media_html,
    tool_call_html,
)

__all__ = ["MAX_SECTIONS", "render_report"]

MAX_SECTIONS = 500
"""Inputs the page shows side by side, most diverging first (all are in comparison.jsonl)."""

_STYLE = """
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.side{border:1px solid #ccc;padding:.4em .8em;background:#fafafa}
.diff{background:#fde9c8;border-radius:3px;padding:0 .35em;margin-right:.3em}
.verdict{border-left:4px solid #3465a4;padding:.2em .8em;margin:.5em 0}
"""


def _e(text: object) -> str:
    """`text` escaped for HTML text and attributes."""
    return html.escape(str(text), quote=True)


def _figure(value: float | None, unit: str) -> str:
    """A figure as the summary table shows it, in its unit (n/a when there is none)."""
    if value is None:
        return "n/a"
    if unit == "$":
        return f"${value:,.6f}"
    return f"{value:,.0f}{unit}"


def _side_html(title: str, run: RunOutcome | None, media: MediaSource) -> str:
    """One side's run of an input: status, figures, tool calls, their media, the answer."""
    if run is None:
        return f'<div class="side"><h4>{_e(title)}</h4><p class="status-error">no run</p></div>'
    status = f'<span class="status-{_e(run.status)}">{_e(run.status)}</span>'
    if run.error_kind or run.error_message:
        status += f" · <b>{_e(run.error_kind or 'error')}</b>: {_e(run.error_message or '')}"
    cost = "" if run.cost_usd is None else f" · ${run.cost_usd:.6f}"
    pieces = [
        f'<div class="side" data-side="{_e(title)}"><h4>{_e(title)}</h4>',
        f'<div class="meta">{status}</div>',
        f'<div class="meta">tokens {run.input_tokens} in / {run.output_tokens} out{cost} · '
        f"{run.latency_ms / 1000:.3f} s · run {_e(run.run_id)}</div>",
        *(tool_call_html(call, "calls ") for call in run.tool_calls),
        *(media_html(part, media) for part in run.tool_media),
        f'<div class="text answer">{_e(run.text)}</div></div>',
    ]
    return "".join(pieces)


def _verdict_html(verdict: JudgeVerdict | None) -> str:
    """The judge's verdict on an input and its reasons (nothing when not judged)."""
    if verdict is None:
        return ""
    if verdict.preferred is None:
        return f'<div class="verdict status-error">judge failed: {_e(verdict.error or "")}</div>'
    head = {"candidate": "candidate better", "recorded": "recorded better", "tie": "tie"}
    flipped = " (the preference flipped with the order)" if verdict.flipped else ""
    reasons = "".join(f"<li>{_e(reason)}</li>" for reason in verdict.reasons)
    return (
        f'<div class="verdict" data-verdict="{_e(verdict.preferred)}"><b>judge: '
        f"{_e(head[verdict.preferred])}</b>{_e(flipped)}<ol>{reasons}</ol></div>"
    )


def _anchor(index: int) -> str:
    """The page anchor of the `index`-th input section."""
    return f"input-{index}"


def _section_html(index: int, item: InputComparison, media: MediaSource) -> str:
    """One input: its text and media once, then the recorded run beside the candidate's."""
    seen = item.recorded or item.candidate
    assert seen is not None  # an input is in a comparison because one side ran it
    badges = "".join(f'<span class="diff">{_e(kind)}</span>' for kind in item.differences)
    shared = "".join(media_html(part, media) for part in seen.input_media)
    return (
        f'<section class="run" id="{_anchor(index)}" data-key="{_e(item.key)}" '
        f'data-input="{_e(item.input_id)}"><h3>key {_e(item.key)} · input {_e(item.input_id)}'
        f"</h3><p>{badges or 'no difference'}</p>"
        f'<div class="message" data-role="user"><div class="meta">input</div>'
        f'<div class="text">{_e(seen.input_text)}</div>{shared}</div>'
        f'<div class="pair">{_side_html("recorded", item.recorded, media)}'
        f"{_side_html('candidate', item.candidate, media)}</div>"
        f"{_verdict_html(item.verdict)}</section>"
    )


def _summary_html(summary: dict[str, Any], failed_gates: Sequence[str]) -> str:
    """The summary table, the failed gates and the keys that diverge most."""
    rows = [
        ("inputs", summary["inputs"]),
        ("compared (both sides ran)", summary["compared"]),
        ("differing", summary["differing"]),
    ]
    rows += [
        (kind, f"{summary['counts'][kind]} ({100 * summary['rates'][kind]:.1f}%)")
        for kind in DIFFERENCE_KINDS
    ]
    for name, unit in (("tokens", ""), ("latency_ms", " ms"), ("cost_usd", "$")):
        figures = summary[name]
        rows.append(
            (
                name,
                f"recorded {_figure(figures['recorded_total'], unit)} → candidate "
                f"{_figure(figures['candidate_total'], unit)}; per input Δ median "
                f"{_figure(figures['delta_median'], unit)}, "
                f"p95 {_figure(figures['delta_p95'], unit)}",
            )
        )
    judge = summary.get("judge")
    if judge is not None:
        rows.append(
            (
                "judge",
                f"{judge['wins']} candidate better, {judge['losses']} recorded better, "
                f"{judge['ties']} ties ({judge['flipped']} flipped with the order), "
                f"{judge['failures']} failed",
            )
        )
    table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    gates = "".join(f"<li>{_e(gate)}</li>" for gate in failed_gates)
    gate_html = f'<div class="status-error">gates failed:<ul>{gates}</ul></div>' if gates else ""
    worst = "".join(
        f"<tr><td>{_e(row['key'])}</td><td>{row['divergence']}</td>"
        f"<td>{row['differing_inputs']}</td></tr>"
        for row in summary["worst_keys"]
    )
    worst_html = (
        '<h2>Keys that diverge most</h2><table id="worst-keys"><tr><th>key</th>'
        f"<th>divergence</th><th>differing inputs</th></tr>{worst}</table>"
        if worst
        else ""
    )
    return f'{gate_html}<table id="summary">{table}</table>{worst_html}'


def render_report(
    comparison: Comparison,
    summary: dict[str, Any],
    media: MediaSource,
    failed_gates: Sequence[str] = (),
) -> str:
    """The report page of a comparison and its summary."""
    ordered = sorted(
        (i for i in comparison.inputs if i.differences or (i.verdict and i.verdict.error)),
        key=lambda i: (-i.divergence, i.key, i.input_id),
    )
    shown = ordered[:MAX_SECTIONS]
    rows = "".join(
        f'<tr class="input-row"><td><a href="#{_anchor(n)}">{_e(item.key)}</a></td>'
        f"<td>{_e(item.input_id)}</td><td>{_e(', '.join(item.differences))}</td>"
        f"<td>{_e(item.verdict.preferred or 'failed') if item.verdict else ''}</td></tr>"
        for n, item in enumerate(shown)
    )
    more = len(ordered) - len(shown)
    note = f"<p>{more} more differing inputs are in comparison.jsonl.</p>" if more else ""
    sections = "".join(_section_html(n, item, media) for n, item in enumerate(shown))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">'
        f"<title>streamagents replay report</title><style>{PAGE_STYLE}{_STYLE}</style></head>"
        f"<body><h1>streamagents replay report</h1>{_summary_html(summary, failed_gates)}"
        f'<h2>Differing inputs ({len(ordered)})</h2><table id="inputs"><tr><th>key</th>'
        f"<th>input</th><th>differences</th><th>judge</th></tr>{rows}</table>{note}"
        f"{sections}</body></html>\n"
    )
