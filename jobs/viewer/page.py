"""A static HTML view of agent runs: one self-contained file showing each run's steps and media.

`render_runs` turns event log events into a page with an index of runs (key, status,
latency, calls, tokens) and, per run, a timeline of its steps: the input, each model request
and response (model, tokens, latency, finish reason), each tool call with its arguments and
result, errors, budget hits and the output. Images, audio and video the model saw or a tool
returned are read from the media store by their refs and embedded as data URIs up to a page
budget; larger ones are written next to the page and linked, shown scaled down. A ref the
store lacks shows a placeholder naming it. Every text is escaped, and the page carries a
Content-Security-Policy that allows no script at all: model and tool text are untrusted.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from streamagents.connectors.media import MediaStore
from streamagents.operators.telemetry.log_runs import runs_in_order
from streamagents.serde.chat import ServerToolEvidence
from streamagents.serde.event_payloads import (
    BudgetExceededPayload,
    ChatRequestPayload,
    ChatResponsePayload,
    ErrorPayload,
    EventPayload,
    FollowupFiredPayload,
    InputPayload,
    OutputPayload,
    ServerToolPayload,
    ToolRequestPayload,
    ToolResponsePayload,
    UnknownPayload,
)
from streamagents.serde.events import AgentEvent, EventType
from streamagents.serde.messages import ChatMessage, MediaPart, MediaRef, TextPart, ToolCall

__all__ = [
    "EMBED_LIMIT_BYTES",
    "PAGE_CSP",
    "PAGE_STYLE",
    "MediaSource",
    "media_html",
    "render_runs",
    "tool_call_html",
]

EMBED_LIMIT_BYTES = 16 * 1024 * 1024
"""Media bytes a page embeds in all; media past it are written as files next to the page."""
EMBED_ONE_LIMIT_BYTES = 2 * 1024 * 1024
"""A single medium larger than this is always written next to the page, never embedded."""

_TIMED = ChatResponsePayload | ToolResponsePayload | OutputPayload | UnknownPayload
"""The payloads that time their step."""
_USED = ChatResponsePayload | OutputPayload | UnknownPayload
"""The payloads that count tokens."""
_SAYS = InputPayload | ChatRequestPayload | ChatResponsePayload | OutputPayload | UnknownPayload
"""The payloads that carry messages."""
_RESULTS = ToolResponsePayload | UnknownPayload
"""The payloads that carry tool results."""
_FAILED = ChatResponsePayload | ErrorPayload | BudgetExceededPayload | UnknownPayload
"""The payloads that may tell an error."""
_WITH_INPUT = (
    InputPayload | OutputPayload | ErrorPayload | BudgetExceededPayload | FollowupFiredPayload
)
"""The payloads that name the run's input."""

PAGE_CSP = (
    "default-src 'none'; img-src data: file:; media-src data: file:; "
    "style-src 'unsafe-inline'; script-src 'none'"
)
PAGE_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.status-ok{color:#176117}.status-error{color:#a40000;font-weight:bold}
.run{border-top:2px solid #888;margin-top:2em}
.timeline{list-style:none;padding-left:0}
.step{border-left:4px solid #bbb;margin:.6em 0;padding:.3em .8em;background:#fafafa}
.step-chat_response{border-color:#3465a4}.step-tool_response{border-color:#73d216}
.step-error,.step-budget_exceeded,.tool-error{border-color:#cc0000;background:#fff0f0}
.meta{color:#555;font-size:.9em}.text{white-space:pre-wrap;margin:.3em 0}
pre{background:#eee;padding:.4em;overflow-x:auto;white-space:pre-wrap}
img.media{max-width:24em;max-height:18em;border:1px solid #999;display:block;margin:.3em 0}
.media-missing{color:#a40000;border:1px dashed #a40000;padding:.3em;display:inline-block}
"""


@dataclass
class MediaSource:
    """Where the page finds media bytes, and the budget it embeds them within."""

    out: Path
    store_root: str | None = None
    embed_limit_bytes: int = EMBED_LIMIT_BYTES
    embedded_bytes: int = 0
    written: dict[str, str] = field(default_factory=dict)
    _stores: dict[str, MediaStore | None] = field(default_factory=dict)

    def _store(self) -> MediaStore | None:
        """The store given (`--media`), opened once; None when none was given or it cannot
        be opened. Never the store a ref names: a logged ref is not trusted to pick one."""
        root = self.store_root
        if root is None:
            return None
        if root not in self._stores:
            try:
                self._stores[root] = MediaStore(root, verify_existing="size")
            except OSError:
                self._stores[root] = None
        return self._stores[root]

    def source(self, ref: MediaRef) -> str | None:
        """A URL for the page (data URI or a file beside it), or None if the store lacks it."""
        if ref.sha256 in self.written:
            return self.written[ref.sha256]
        store = self._store()
        try:
            data = store.get(ref) if store is not None else None
        except Exception:  # missing, corrupt or unreachable: the page shows a placeholder
            data = None
        if data is None:
            return None
        fits = self.embedded_bytes + len(data) <= self.embed_limit_bytes
        if fits and len(data) <= EMBED_ONE_LIMIT_BYTES:
            self.embedded_bytes += len(data)
            url = f"data:{ref.mime_type};base64,{base64.b64encode(data).decode('ascii')}"
        else:
            folder = self.out.with_name(self.out.name + ".media")
            folder.mkdir(parents=True, exist_ok=True)
            extension = re.sub(r"[^a-z0-9]", "", ref.mime_type.rsplit("/", 1)[-1].lower())
            name = f"{ref.sha256}.{extension or 'bin'}"
            (folder / name).write_bytes(data)
            url = f"{folder.name}/{name}"
        self.written[ref.sha256] = url
        return url


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _when(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def media_html(part: MediaPart, media: MediaSource) -> str:
    """A medium as the page shows it: embedded or linked from the store, else a placeholder."""
    kind, mime, ref = part.kind, part.mime_type, part.ref
    label = f"{kind} {mime}"
    if ref is not None:
        label += f", {ref.size_bytes} bytes, sha256 {ref.sha256[:12]}…"
        url = media.source(ref)
        if url is None:
            return (
                f'<div class="media-missing" data-ref="{_e(ref.sha256)}">missing from the media '
                f"store: {_e(label)} ({_e(ref.uri or ref.sha256)})</div>"
            )
    elif part.url is not None:
        return f'<div class="media-url">{_e(label)}: {_e(part.url)}</div>'
    else:
        return f'<div class="media-missing">{_e(label)}: not stored</div>'
    if kind == "image":
        return f'<img class="media" alt="{_e(label)}" title="{_e(label)}" src="{_e(url)}">'
    if kind in ("audio", "video"):
        return f'<{kind} class="media" controls src="{_e(url)}" title="{_e(label)}"></{kind}>'
    return f'<a class="media" href="{_e(url)}" download>{_e(label)}</a>'


def tool_call_html(call: ToolCall, lead: str = "") -> str:
    """A tool call: its name, id and arguments as indented JSON."""
    arguments = json.dumps(call.arguments, ensure_ascii=False, indent=1)
    return (
        f'<div class="tool-call">{lead}<b>{_e(call.name)}</b> ({_e(call.id)})'
        f"<pre>{_e(arguments)}</pre></div>"
    )


def _link(uri: str, text: str) -> str:
    """A link for a web address; anything else (javascript:, data:...) stays plain text."""
    if re.match(r"^https?://", uri, re.IGNORECASE):
        return f'<a href="{_e(uri)}" rel="noreferrer noopener">{_e(text or uri)}</a>'
    return _e(f"{text} ({uri})" if text else uri)


def _evidence_html(evidence: ServerToolEvidence) -> str:
    """What a Gemini built-in tool did: search queries and sources, a URL read, code run."""
    if evidence.tool == "google_search":
        queries = "; ".join(evidence.queries)
        sources = "".join(f"<li>{_link(s.uri, s.title)}</li>" for s in evidence.sources)
        return (
            f'<div class="evidence"><b>search</b> {_e(queries)}'
            f'<ul class="sources">{sources}</ul></div>'
        )
    if evidence.tool == "url_context":
        return (
            f'<div class="evidence"><b>url</b> {_link(evidence.url or "", "")} '
            f"{_e(evidence.status or '')}</div>"
        )
    return (
        f'<div class="evidence"><b>code</b> ({_e(evidence.language or "?")}, '
        f"{_e(evidence.outcome or '?')})<pre>{_e(evidence.code or '')}</pre>"
        f"<pre>{_e(evidence.output or '')}</pre></div>"
    )


def _message_html(message: ChatMessage, media: MediaSource) -> str:
    pieces = [f'<div class="message" data-role="{_e(message.role)}">']
    head = message.role + (f" · {message.name}" if message.name else "")
    if message.is_error:
        head += " · error"
    pieces.append(f'<div class="meta">{_e(head)}</div>')
    if message.parts:
        for part in message.parts:
            if isinstance(part, TextPart):
                pieces.append(f'<div class="text">{_e(part.text)}</div>')
            else:
                pieces.append(media_html(part, media))
    elif message.content:
        pieces.append(f'<div class="text">{_e(message.content)}</div>')
    pieces += [tool_call_html(call, "calls ") for call in message.tool_calls]
    pieces.append("</div>")
    return "".join(pieces)


def _call_facts(payload: EventPayload) -> list[str]:
    """What a step says of its model or tool call: model, tokens, latency, reply facts."""
    facts = []
    if isinstance(payload, ChatRequestPayload | ChatResponsePayload | UnknownPayload):
        facts += [payload.model] if payload.model else []
    if isinstance(payload, _USED) and payload.usage is not None:
        usage = payload.usage
        facts.append(f"tokens {usage.input_tokens} in / {usage.output_tokens} out")
        if usage.cached_tokens:
            facts.append(f"{usage.cached_tokens} cached")
    if isinstance(payload, _TIMED) and payload.latency_ms is not None:
        facts.append(f"{payload.latency_ms:.0f} ms")
    if isinstance(payload, ChatResponsePayload | UnknownPayload):
        if payload.finish_reason:
            facts.append(f"finish {payload.finish_reason}")
        if payload.interaction_id:
            facts.append(f"interaction {payload.interaction_id}")
        if payload.continued_from:
            facts.append(f"continues {payload.continued_from}")
        if payload.cost_usd is not None:
            facts.append(f"${payload.cost_usd:.4f}")
    return facts


def _step_html(event: AgentEvent, start_ms: int, media: MediaSource) -> str:
    payload = event.payload
    facts = [f"+{(event.timestamp_ms - start_ms) / 1000:.3f} s", event.event_type.value]
    facts += _call_facts(payload)
    facts += [f"{k}={v}" for k, v in sorted(payload.attributes.items()) if k != "input_id"]
    classes = f"step step-{event.event_type.value}"
    tool_results = payload.tool_results if isinstance(payload, _RESULTS) else []
    if any(result.is_error for result in tool_results):
        classes += " tool-error"
    pieces = [
        f'<li class="{classes}" data-type="{_e(event.event_type.value)}" '
        f'data-sequence="{event.sequence}">',
        f'<div class="meta">{_e(" · ".join(facts))}</div>',
    ]
    if isinstance(payload, _FAILED) and (payload.error_class or payload.error_message):
        pieces.append(
            f'<div class="error"><b>{_e(payload.error_class or "error")}</b>: '
            f"{_e(payload.error_message or '')}</div>"
        )
    messages = payload.messages if isinstance(payload, _SAYS) else []
    pieces += [_message_html(m, media) for m in messages + tool_results]
    if isinstance(payload, ServerToolPayload | UnknownPayload):
        pieces += [_evidence_html(e) for e in payload.evidence]
    if isinstance(payload, ToolRequestPayload):
        pieces += [tool_call_html(call) for call in payload.tool_calls]
    pieces.append("</li>")
    return "".join(pieces)


@dataclass(frozen=True)
class _Run:
    """One run's events in order, with the facts the index shows."""

    run_id: str
    events: list[AgentEvent]

    @property
    def status(self) -> str:
        outputs = [e.payload for e in self.events if isinstance(e.payload, OutputPayload)]
        if not outputs:
            return "in progress"
        return "?" if outputs[-1].status is None else outputs[-1].status

    @property
    def input_id(self) -> str:
        """The input id the first of its events naming one gives ("" if none does)."""
        found = (e.payload.input_id for e in self.events if isinstance(e.payload, _WITH_INPUT))
        return next((input_id for input_id in found if input_id is not None), "")

    def count(self, kind: EventType) -> int:
        return sum(1 for e in self.events if e.event_type == kind)

    def cost(self) -> str:
        replies = (e.payload for e in self.events)
        costs = [
            p.cost_usd
            for p in replies
            if isinstance(p, ChatResponsePayload | UnknownPayload) and p.cost_usd is not None
        ]
        return f" · ${sum(costs):.4f}" if costs else ""

    def tokens(self) -> tuple[int, int]:
        found = (e.payload for e in self.events)
        usages = [p.usage for p in found if isinstance(p, _USED) and p.usage is not None]
        return sum(u.input_tokens for u in usages), sum(u.output_tokens for u in usages)


def _anchor(run_id: str) -> str:
    return "run-" + re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)


def _runs(events: Iterable[AgentEvent]) -> list[_Run]:
    return [_Run(run_id, ordered) for run_id, ordered in runs_in_order(events)]


def render_runs(events: Iterable[AgentEvent], media: MediaSource) -> tuple[str, int]:
    """The page showing every run in `events`, and how many runs it shows."""
    runs = _runs(events)
    rows, sections = [], []
    for run in runs:
        first, last = run.events[0], run.events[-1]
        latency = (last.timestamp_ms - first.timestamp_ms) / 1000
        tokens_in, tokens_out = run.tokens()
        status = run.status
        anchor = _anchor(run.run_id)
        facts = [
            _e(first.key or ""),
            _e(run.input_id),
            f'<span class="status-{_e(status)}">{_e(status)}</span>',
            _e(_when(first.timestamp_ms)),
            f"{latency:.3f} s",
            str(run.count(EventType.CHAT_RESPONSE)),
            str(run.count(EventType.TOOL_RESPONSE)),
            f"{tokens_in} / {tokens_out}",
        ]
        rows.append(
            f'<tr class="run-row" data-run="{_e(run.run_id)}"><td><a href="#{anchor}">'
            f"{_e(run.run_id)}</a></td>" + "".join(f"<td>{f}</td>" for f in facts) + "</tr>"
        )
        steps = "".join(_step_html(e, first.timestamp_ms, media) for e in run.events)
        sections.append(
            f'<section class="run" id="{anchor}" data-run="{_e(run.run_id)}">'
            f"<h2>Run {_e(run.run_id)}</h2>"
            f'<p class="summary">key {facts[0]} · input {facts[1]} · job {_e(first.job_id)} · '
            f"status {facts[2]} · {facts[4]} · {facts[5]} model calls · {facts[6]} tool "
            f"calls · tokens {facts[7]}{_e(run.cost())}</p>"
            f'<ol class="timeline">{steps}</ol></section>'
        )
    header = (
        "<tr><th>run</th><th>key</th><th>input</th><th>status</th><th>started (UTC)</th>"
        "<th>latency</th><th>model calls</th><th>tool calls</th><th>tokens in / out</th></tr>"
    )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">'
        f"<title>streamagents runs ({len(runs)})</title><style>{PAGE_STYLE}</style></head><body>"
        f"<h1>streamagents runs</h1><p>{len(runs)} runs.</p>"
        f'<table id="runs">{header}{"".join(rows)}</table>{"".join(sections)}</body></html>\n'
    )
    return page, len(runs)
