"""`streamagents eventlog export-otlp`: OpenTelemetry GenAI spans of the runs in an event log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from streamagents.connectors.eventlog import DamagedFile, read_events
from streamagents.jobs.cli.eventlog import add_in_progress_flag, report_damaged
from streamagents.jobs.spec.yaml_source import expand_assignments
from streamagents.jobs.telemetry.otlp_export import export_http, otlp_json
from streamagents.operators.telemetry.sdk_spans import OtelMissingError, require_otel
from streamagents.operators.telemetry.spans import spans_from_events

__all__ = ["register_export"]


def register_export(commands: argparse._SubParsersAction) -> None:
    """Add `export-otlp` to the `eventlog` sub-commands."""
    export = commands.add_parser(
        "export-otlp",
        help="Spans of each run (OpenTelemetry GenAI conventions) to a JSON file or a collector.",
    )
    export.add_argument("path", help="An event log file or a directory of them.")
    export.add_argument("--json", metavar="FILE", help="Write the spans as OTLP/JSON to FILE.")
    export.add_argument(
        "--endpoint",
        metavar="URL",
        help="Post the spans to this OTLP/HTTP collector (a bare URL gets /v1/traces).",
    )
    export.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="An HTTP header for the collector (repeatable); ${NAME} in VALUE is read from "
        "the environment, so a token need not be on the command line.",
    )
    export.add_argument(
        "--capture-content",
        action="store_true",
        help="Include message text and tool arguments/results (media as store URIs).",
    )
    add_in_progress_flag(export)
    export.set_defaults(handler=_export)


def _fail(message: str) -> int:
    print(f"streamagents eventlog export-otlp: {message}", file=sys.stderr)
    return 2


def _export(args: argparse.Namespace) -> int:
    if not args.json and not args.endpoint:
        return _fail("say where the spans go: --json FILE and/or --endpoint URL")
    try:
        headers = expand_assignments(args.header, "--header")
    except ValueError as exc:
        return _fail(str(exc))
    try:
        require_otel()
    except OtelMissingError as error:
        return _fail(str(error))
    damaged: list[DamagedFile] = []
    try:
        events = read_events(
            args.path, typed=True, include_in_progress=args.include_in_progress, damaged=damaged
        )
        spans = spans_from_events(events, capture_content=args.capture_content)
    except FileNotFoundError as error:
        return _fail(str(error))
    runs = sum(1 for span in spans if span.parent_span_id is None)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(otlp_json(spans), indent=1), encoding="utf-8")
        print(f"wrote {len(spans)} spans of {runs} runs to {args.json}")
    if args.endpoint:
        if not export_http(spans, args.endpoint, headers):
            report_damaged(damaged)
            return _fail(f"the collector at {args.endpoint} did not accept the spans")
        print(f"sent {len(spans)} spans of {runs} runs to {args.endpoint}")
    return report_damaged(damaged)
