"""`streamagents replay-report`: compare a candidate's event log with the recorded one.

The report's options (judge, rubric, gates, media) are added by `add_report_options`, and
`report_with_options` runs the report from them, so `streamagents replay` can offer the
same options and write the same report after its job.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Sequence

from streamagents.connectors.providers import PROVIDER_NAMES
from streamagents.jobs.replay.report.gates import GATE_METRICS, parse_gate
from streamagents.jobs.replay.report.judge import judge_model, load_judge_spec
from streamagents.jobs.replay.report.report import run_report
from streamagents.jobs.replay.report.runs import RunKey
from streamagents.jobs.viewer.page import EMBED_LIMIT_BYTES
from streamagents.operators.agent.config import ModelTarget

__all__ = ["add_report_options", "register", "report_options_error", "report_with_options"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `replay-report` sub-command."""
    command = subparsers.add_parser(
        "replay-report",
        help="Compare a candidate's runs with the recorded ones: report and gates.",
        description="Pair the runs of two event logs by key and input id, say how the "
        "candidate's differ, optionally judge them with a model, write comparison.jsonl, "
        "summary.json and report.html, and exit 1 when a --fail-if gate holds.",
    )
    command.add_argument(
        "--recorded", nargs="+", action="extend", required=True, metavar="PATH",
        help="The recorded event log: files or folders.",
    )  # fmt: skip
    command.add_argument(
        "--candidate", nargs="+", action="extend", required=True, metavar="PATH",
        help="The candidate's event log: files or folders.",
    )  # fmt: skip
    command.add_argument("--out", required=True, metavar="DIR", help="Where the report goes.")
    add_report_options(command)
    command.set_defaults(handler=_replay_report)


def add_report_options(command: argparse.ArgumentParser) -> None:
    """Add the report's options: --judge-spec | --judge-model with --rubric, --fail-if,
    --media, --embed-limit-mb."""
    judging = command.add_mutually_exclusive_group()
    judging.add_argument(
        "--judge-spec", metavar="FILE", help="A YAML file naming the judge model and rubric."
    )
    judging.add_argument(
        "--judge-model",
        metavar="PROVIDER:MODEL",
        help=f"The judge model (provider one of {', '.join(PROVIDER_NAMES)}); needs --rubric.",
    )
    command.add_argument("--rubric", metavar="FILE", help="The rubric for --judge-model.")
    command.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help=f"Exit 1 when METRIC OP NUMBER[%%] holds; metrics: {', '.join(GATE_METRICS)}.",
    )
    command.add_argument(
        "--media",
        metavar="ROOT",
        help="The media store root (path or URI) to show media from; without it none are "
        "shown (the store a logged ref names is never read).",
    )
    command.add_argument(
        "--embed-limit-mb",
        type=float,
        default=EMBED_LIMIT_BYTES / 2**20,
        help="Media MiB embedded in the page in all; past it, media are written next to it.",
    )


def _judge_target(args: argparse.Namespace) -> tuple[ModelTarget, str] | None:
    """The judge model and rubric the arguments name (None: no judge); ValueError if wrong."""
    if args.judge_spec is not None:
        if args.rubric is not None:
            raise ValueError("--rubric goes with --judge-model; a judge spec holds its rubric")
        return load_judge_spec(args.judge_spec)
    if args.judge_model is None:
        if args.rubric is not None:
            raise ValueError("--rubric needs --judge-model")
        return None
    provider, _, model = args.judge_model.partition(":")
    if provider not in PROVIDER_NAMES or not model:
        raise ValueError(
            f"--judge-model {args.judge_model!r}: expected PROVIDER:MODEL with a provider "
            f"of {', '.join(PROVIDER_NAMES)}"
        )
    if args.rubric is None:
        raise ValueError("--judge-model needs --rubric FILE")
    with open(args.rubric, encoding="utf-8") as rubric:
        return ModelTarget(provider=provider, model=model), rubric.read()


def report_options_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the report's options in `args` (None: nothing), checked before a
    replay's job runs so a bad gate or judge stops it at once."""
    try:
        target = _judge_target(args)
        gates = [parse_gate(text) for text in args.fail_if]
    except (OSError, ValueError) as error:
        return str(error)
    if target is None and any(gate.needs_judge for gate in gates):
        return "judge_* gates need a judge (--judge-spec or --judge-model)"
    return None


def report_with_options(
    args: argparse.Namespace,
    recorded: Sequence[str | os.PathLike[str]],
    candidate: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    only: Collection[RunKey] | None = None,
) -> int:
    """Write the report of `candidate` against `recorded` into `out_dir` as the options in
    `args` (from `add_report_options`) say, the recorded side limited to `only` when given;
    the exit code (2: a usage error)."""
    try:
        target = _judge_target(args)
    except (OSError, ValueError) as error:
        print(f"streamagents replay-report: {error}", file=sys.stderr)
        return 2
    return run_report(
        recorded,
        candidate,
        out_dir,
        fail_if=args.fail_if,
        judge_with=None if target is None else (judge_model(target[0]), target[1]),
        media_root=args.media,
        embed_limit_bytes=int(args.embed_limit_mb * 2**20),
        only=only,
    )


def _replay_report(args: argparse.Namespace) -> int:
    """Run the command; the exit code."""
    return report_with_options(args, args.recorded, args.candidate, args.out)
