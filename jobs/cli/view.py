"""`streamagents eventlog view`: one self-contained HTML page of the runs in an event log."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streamagents.connectors.eventlog import DamagedFile, read_events
from streamagents.jobs.cli.eventlog import add_in_progress_flag, report_damaged
from streamagents.jobs.viewer.page import EMBED_LIMIT_BYTES, MediaSource, render_runs

__all__ = ["register_view"]


def register_view(commands: argparse._SubParsersAction) -> None:
    """Add `view` (alias `show`) to the `eventlog` sub-commands."""
    view = commands.add_parser(
        "view",
        aliases=["show"],
        help="Write one HTML page showing runs, their steps, tool calls and media.",
    )
    view.add_argument("path", help="An event log file or a directory of them.")
    view.add_argument("--out", required=True, metavar="FILE", help="The HTML file to write.")
    view.add_argument(
        "--media",
        metavar="ROOT",
        help="The media store root (path or URI) to show media from; without it none are "
        "shown (the store a logged ref names is never read).",
    )
    view.add_argument("--run", metavar="RUN_ID", help="Show only this run.")
    view.add_argument("--key", help="Show only the runs of this key.")
    view.add_argument(
        "--embed-limit-mb",
        type=float,
        default=EMBED_LIMIT_BYTES / 2**20,
        help="Media MiB embedded in the page in all; past it, media are written next to it.",
    )
    add_in_progress_flag(view)
    view.set_defaults(handler=_view)


def _view(args: argparse.Namespace) -> int:
    damaged: list[DamagedFile] = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    media = MediaSource(out, args.media, int(args.embed_limit_mb * 2**20))
    try:
        events = (
            event
            for event in read_events(
                args.path, typed=True, include_in_progress=args.include_in_progress, damaged=damaged
            )
            if (args.run is None or event.run_id == args.run)
            and (args.key is None or event.key == args.key)
        )
        page, runs = render_runs(events, media)
    except FileNotFoundError as error:
        print(f"streamagents eventlog view: {error}", file=sys.stderr)
        return 2
    out.write_text(page, encoding="utf-8")
    print(f"wrote {runs} runs to {out} ({len(page.encode()) / 1024:.0f} KiB)")
    return report_damaged(damaged)
