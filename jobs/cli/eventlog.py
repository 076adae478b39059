"""`streamagents eventlog cat|stats|export-otlp|view`: print, summarise, trace or view logs."""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from streamagents.connectors.eventlog import DamagedFile, read_events
from streamagents.serde.avro import SCHEMA_VERSIONS
from streamagents.serde.event_payloads import ContextCachePayload
from streamagents.serde.event_storage import typed_fields

__all__ = ["DAMAGED_EXIT", "add_in_progress_flag", "register", "report_damaged", "summarize"]

_PREVIEW = 80
DAMAGED_EXIT = 3
"""Exit code of `cat` and `stats` when some files were damaged: every event that could be
read was printed (or counted), and each damaged file was named on stderr."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `eventlog` command with its `cat`, `stats`, `export-otlp` and `view` sub-commands."""
    parser = subparsers.add_parser("eventlog", help="Read Avro event log files.")
    commands = parser.add_subparsers(dest="eventlog_command", required=True, metavar="ACTION")
    cat = commands.add_parser("cat", help="Print events, one per line.")
    cat.add_argument("path", help="An event log file or a directory of them.")
    cat.add_argument(
        "--version",
        type=int,
        choices=SCHEMA_VERSIONS,
        default=None,
        help="Read under this schema version (default: newest).",
    )
    cat.add_argument("--json", action="store_true", help="Print each event as a JSON object.")
    add_in_progress_flag(cat)
    cat.set_defaults(handler=_cat)
    stats = commands.add_parser("stats", help="Counts, tokens, errors and latency percentiles.")
    stats.add_argument("path", help="An event log file or a directory of them.")
    stats.add_argument("--json", action="store_true", help="Print the summary as JSON.")
    add_in_progress_flag(stats)
    stats.set_defaults(handler=_stats)
    from streamagents.jobs.cli.otel import register_export  # they read this module
    from streamagents.jobs.cli.view import register_view

    register_export(commands)
    register_view(commands)


def add_in_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--include-in-progress",
        action="store_true",
        help="Also read files still being written (or left by a stopped job), up to their "
        "last flushed block.",
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _evidence_text(evidence: dict[str, Any]) -> str:
    """One built-in tool's evidence in a line: search queries and sources, URL, code run."""
    if evidence["tool"] == "google_search":
        queries = "; ".join(evidence["queries"])
        return f"search {queries!r}, {len(evidence['sources'])} source(s)"
    if evidence["tool"] == "url_context":
        return f"url {evidence['url']} {evidence['status'] or ''}".rstrip()
    code = (evidence["code"] or "").replace("\n", " ")
    return f"code ({evidence['language'] or '?'}) {code} -> {evidence['outcome'] or '?'}"


def _cache_facts(record: dict[str, Any]) -> ContextCachePayload:
    """The typed facts of a context_cache record (read under any version)."""
    stored = {"attributes": record["payload"]["attributes"]}
    return ContextCachePayload(**typed_fields("context_cache", stored))


def _preview(record: dict[str, Any]) -> str:
    payload = record["payload"]
    if payload.get("evidence"):
        text = " | ".join(_evidence_text(e) for e in payload["evidence"])
        return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"
    if record["event_type"] == "context_cache":
        facts = _cache_facts(record)
        return f"{facts.action} {facts.cache or ''}: {facts.reason or ''}"
    if payload["error_message"] is not None:
        return payload["error_message"]["text"]
    texts = [
        (message["content"] or {}).get("text", "")
        + "".join((part["text"] or {}).get("text", "") for part in message["parts"])
        for message in payload["messages"] + payload["tool_results"]
    ]
    calls = [f"{call['name']}({call['arguments']['text']})" for call in payload["tool_calls"]]
    text = " | ".join(t for t in texts + calls if t)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _line(record: dict[str, Any]) -> str:
    payload = record["payload"]
    when = _jsonable(record["timestamp"])
    fields = [str(when), record["event_type"], f"key={record['key']}", f"run={record['run_id']}"]
    fields.append(f"seq={record['sequence']}")
    if payload["model"]:
        fields.append(f"model={payload['model']}")
    if payload["usage"]:
        fields.append(
            f"tokens={payload['usage']['input_tokens']}/{payload['usage']['output_tokens']}"
        )
        if payload["usage"].get("cached_tokens"):
            fields.append(f"cached={payload['usage']['cached_tokens']}")
    if payload["latency_ms"] is not None:
        fields.append(f"latency={payload['latency_ms']:.1f}ms")
    if payload["error_class"]:
        fields.append(f"error={payload['error_class']}")
    preview = _preview(record)
    return "  ".join(fields) + (f"  {json.dumps(preview, ensure_ascii=False)}" if preview else "")


def report_damaged(damaged: list[DamagedFile]) -> int:
    for report in damaged:
        print(f"streamagents eventlog: damaged file {report}", file=sys.stderr)
    if damaged:
        print(
            f"streamagents eventlog: {len(damaged)} damaged file(s); every other file was read",
            file=sys.stderr,
        )
    return DAMAGED_EXIT if damaged else 0


def _cat(args: argparse.Namespace) -> int:
    damaged: list[DamagedFile] = []
    try:
        records = read_events(
            args.path,
            args.version,
            include_in_progress=args.include_in_progress,
            damaged=damaged,
        )
        for record in records:
            if args.json:
                print(json.dumps(_jsonable(record), ensure_ascii=False))
            else:
                print(_line(record))
    except FileNotFoundError as error:
        print(f"streamagents eventlog: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return report_damaged(damaged)


def _percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts by type, distinct keys and runs, token totals, errors and latency percentiles."""
    by_type: Counter[str] = Counter()
    keys: set[str] = set()
    runs: set[str] = set()
    input_tokens = output_tokens = cached_tokens = errors = tool_errors = 0
    server_tools: Counter[str] = Counter()
    cache: Counter[str] = Counter()
    latencies: list[float] = []
    for record in records:
        payload = record["payload"]
        by_type[record["event_type"]] += 1
        if record["key"] is not None:
            keys.add(record["key"])
        if record["run_id"] is not None:
            runs.add(record["run_id"])
        if payload["usage"]:
            input_tokens += payload["usage"]["input_tokens"]
            output_tokens += payload["usage"]["output_tokens"]
            cached_tokens += payload["usage"].get("cached_tokens", 0)
        for evidence in payload.get("evidence") or ():
            server_tools[evidence["tool"]] += 1
            server_tools["search_queries"] += len(evidence["queries"])
            server_tools["sources"] += len(evidence["sources"])
        if record["event_type"] == "context_cache":
            action = _cache_facts(record).action
            cache["?" if action is None else action] += 1
        if record["event_type"] == "error" or payload["error_class"]:
            errors += 1
        tool_errors += sum(1 for result in payload["tool_results"] if result["is_error"])
        if payload["latency_ms"] is not None:
            latencies.append(payload["latency_ms"])
    latencies.sort()
    latency = (
        {
            "count": len(latencies),
            "p50": _percentile(latencies, 0.50),
            "p90": _percentile(latencies, 0.90),
            "p99": _percentile(latencies, 0.99),
            "max": latencies[-1],
        }
        if latencies
        else {"count": 0}
    )
    return {
        "events": sum(by_type.values()),
        "by_type": dict(sorted(by_type.items())),
        "keys": len(keys),
        "runs": len(runs),
        "tokens": {"input": input_tokens, "output": output_tokens, "cached": cached_tokens},
        "server_tools": {k: v for k, v in sorted(server_tools.items()) if v},
        "context_cache": dict(sorted(cache.items())),
        "errors": errors,
        "tool_errors": tool_errors,
        "latency_ms": latency,
    }


def _stats(args: argparse.Namespace) -> int:
    damaged: list[DamagedFile] = []
    try:
        summary = summarize(
            read_events(args.path, include_in_progress=args.include_in_progress, damaged=damaged)
        )
    except FileNotFoundError as error:
        print(f"streamagents eventlog: {error}", file=sys.stderr)
        return 2
    if args.json:
        if damaged:  # only then: a clean log's summary stays as it always was
            summary["damaged_files"] = [
                {"path": str(d.path), "error": d.error, "events_read": d.events_read}
                for d in damaged
            ]
        print(json.dumps(summary))
        return report_damaged(damaged)
    print(f"events       {summary['events']}")
    for name, count in summary["by_type"].items():
        print(f"  {name:<14} {count}")
    print(f"keys         {summary['keys']}")
    print(f"runs         {summary['runs']}")
    tokens = summary["tokens"]
    print(
        f"tokens       input {tokens['input']}  output {tokens['output']}  "
        f"(cached input {tokens['cached']})"
    )
    if summary["server_tools"]:
        tools = summary["server_tools"]
        print("server tools " + "  ".join(f"{name} {count}" for name, count in tools.items()))
    if summary["context_cache"]:
        print(
            "cache        "
            + "  ".join(f"{name} {count}" for name, count in summary["context_cache"].items())
        )
    print(f"errors       {summary['errors']}  (tool errors {summary['tool_errors']})")
    latency = summary["latency_ms"]
    if latency["count"]:
        print(
            f"latency ms   p50 {latency['p50']:.1f}  p90 {latency['p90']:.1f}  "
            f"p99 {latency['p99']:.1f}  max {latency['max']:.1f}  (n={latency['count']})"
        )
    else:
        print("latency ms   none recorded")
    if damaged:
        print(f"damaged      {len(damaged)} file(s), see above")
    return report_damaged(damaged)
