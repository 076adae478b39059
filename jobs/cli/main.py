"""The `streamagents` command line: one sub-command module per area, registered here."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from streamagents.jobs.cluster.local_jvm import start_in_background

__all__ = ["build_parser", "exit_at_once", "main"]

# Each module has `register(subparsers)`, which adds its sub-commands and sets `handler`.
_COMMAND_MODULES: tuple[str, ...] = (
    "streamagents.jobs.cli.run",
    "streamagents.jobs.cli.cluster",
    "streamagents.jobs.cli.eventlog",
    "streamagents.jobs.cli.jars",
    "streamagents.jobs.cli.replay",
    "streamagents.jobs.cli.try_input",
    "streamagents.jobs.replay.report.command",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="streamagents", description="Multimodal agent jobs on Apache Flink."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code. A `run` starts launching its
    local JVM first, so that the launch overlaps the imports below (`jobs.cluster.local_jvm`).

    As the process's own command line (no `argv` given), a command that leaves nothing for
    anyone to read (a handler setting `args.exit_at_once`: a `run` that ended its bounded
    input itself) ends the process at once (`exit_at_once`)."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["run"]:
        start_in_background()
    args = build_parser().parse_args(argv)
    code = int(args.handler(args) or 0)
    if argv is None and getattr(args, "exit_at_once", False):
        exit_at_once(code)
    return code


def exit_at_once(code: int) -> NoReturn:
    """Flush the output and end the process with `code`, skipping Python's teardown:
    unloading the modules PyFlink brings (Apache Beam, py4j) takes 0.4-0.8 s after the last
    line, with nothing left to do (no atexit hooks run; the local JVM goes with the process)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
