"""`streamagents replay`: a candidate spec's agent over the recorded inputs of an event log.

The recorded runs come from event-log files (`--log`) or from the event-log topic
(`--log-topic`, `--log-spec`: `streamagents.jobs.replay.topic`), whose messages are first
copied into `recorded/` as an event-log file; from there both run the same way.
The job is the one `run` builds from the candidate spec (same engine, same operator), with
its source replaced by the recorded inputs (`streamagents.jobs.replay.lines`) in per-key recorded
order and every sink replaced by files under the output folder: `outputs/`,
`dead-letters/`, `approval-requests/` (when the spec has that sink), the replay's own
`eventlog/` (at `verbose`), `media/` and `checkpoints/`. The spec's own sinks, event log,
approvals source, checkpoint directory and telemetry are never used, and its media store
is only read: the media the recorded lines refer to are copied into `media/` first. Its
MCP servers are started only when declared `replay: live`, and no run parks for a decision
(see `streamagents.operators.agent.replay`). The runs the log cannot replay
are listed in `not_replayable.jsonl`, and `replay.json` says what was replayed. After the
job, the report of the replayed runs against their recording goes to `report/`
(`streamagents.jobs.replay.report`), and its `--fail-if` gates decide the exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from streamagents.connectors.eventlog import DamagedFile, finalize_in_progress
from streamagents.connectors.media import MediaStore
from streamagents.jobs.cluster.standalone import free_port, interpreter_first
from streamagents.jobs.model_choice import demo_server, model_spec
from streamagents.jobs.replay.lines import (
    InputSource,
    choose,
    copy_media,
    parse_time_ms,
    recorded_runs,
    replay_lines,
)
from streamagents.jobs.replay.report.command import (
    add_report_options,
    report_options_error,
    report_with_options,
)
from streamagents.jobs.replay.topic import (
    LogTopic,
    add_topic_options,
    copy_topic,
    log_topic,
)
from streamagents.jobs.replay.topic_log import TopicLog, copied_messages, write_topic_log
from streamagents.jobs.spec import (
    EventLogSpec,
    FilesSourceSpec,
    JobSpec,
    LoadedSpec,
    SinkSpec,
    SinksSpec,
    SourceSpec,
    SpecError,
    check_runnable,
    load_spec,
)
from streamagents.serde.safe_text import scrub

__all__ = ["register", "replay_spec"]


def register(subparsers: Any) -> None:
    """Add the `replay` sub-command."""
    replay = subparsers.add_parser(
        "replay",
        help="run a candidate spec over the recorded inputs of an event log",
        description="Run a candidate spec's agent over the inputs an event log recorded, as "
        "a bounded job, per key in the recorded order; outputs, dead letters and the "
        "replay's own event log go to files under --out (the spec's sinks are not used).",
    )
    replay.add_argument(
        "--log", nargs="+", help="event-log files or folders (recorded runs), or the topic below"
    )
    replay.add_argument("--spec", required=True, help="the candidate job spec (YAML)")
    replay.add_argument("--out", required=True, help="folder for the replay's files (new)")
    replay.add_argument("--keys", help="only these keys, comma-separated")
    replay.add_argument("--since", help="only runs that began at or after (ISO 8601 or ms)")
    replay.add_argument("--until", help="only runs that began before (ISO 8601 or ms)")
    replay.add_argument(
        "--sample", type=float, help="replay this fraction of the runs (0-1, by run id)"
    )
    replay.add_argument("--parallelism", type=int, help="the job's parallelism (default: spec's)")
    replay.add_argument(
        "--inputs-from",
        help="JSONL file or folder of the original inputs, joined by input id, for runs whose "
        "input the log clipped (level standard) or does not hold",
    )
    add_topic_options(replay)
    add_report_options(replay)
    replay.set_defaults(handler=_replay)


def replay_spec(spec: JobSpec, out: Path, inputs: Path, parallelism: int | None) -> JobSpec:
    """The candidate spec with the recorded inputs as its source and every sink, the event
    log, the media store and checkpoints in `out`; no approvals source, no telemetry block."""
    sinks = spec.sinks
    return spec.model_copy(
        update={
            "name": f"{spec.name}-replay",
            # the recorded inputs, whose refs are the job's own offloaded media; their URLs
            # still follow the production source's rules
            "source": SourceSpec(
                files=FilesSourceSpec(path=str(inputs)),
                media=spec.source.media.model_copy(update={"store_refs": True}),
            ),
            "sinks": SinksSpec(
                outputs=SinkSpec(path=str(out / "outputs")),
                dead_letters=SinkSpec(path=str(out / "dead-letters")),
                approval_requests=None
                if sinks.approval_requests is None
                else SinkSpec(path=str(out / "approval-requests")),
            ),
            "event_log": EventLogSpec(path=str(out / "eventlog"), level="verbose"),
            "media_store": str(out / "media"),
            "checkpointing": spec.checkpointing.model_copy(
                update={"dir": str(out / "checkpoints")}
            ),
            "approvals": None,
            "telemetry": None,
            "parallelism": parallelism or spec.parallelism,
        }
    )


def _replay(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    inputs = out / "inputs" / "recorded.jsonl"
    try:
        loaded = load_spec(args.spec)
        production_media = args.media or loaded.spec.media_store
        # checked as the replay runs it: a production spec's Kafka parts are not used
        spec = replay_spec(loaded.spec, out, inputs, args.parallelism)
        loaded = dataclasses.replace(loaded, spec=spec, telemetry=None)
        check_runnable(loaded, replay=True)
    except SpecError as exc:
        print(f"invalid job spec:\n{exc}", file=sys.stderr)
        return 2
    used = [
        n
        for n in ("outputs", "dead-letters", "eventlog", "media", "recorded")
        if (out / n).exists()
    ]
    if used:
        print(f"replay: {out} already holds {', '.join(used)}; give a new folder", file=sys.stderr)
        return 2
    if args.sample is not None and not 0 < args.sample <= 1:
        print("replay: --sample must be a fraction in (0, 1]", file=sys.stderr)
        return 2
    report_error = report_options_error(args)
    if report_error is not None:
        print(f"replay: {report_error}", file=sys.stderr)
        return 2
    try:
        topic = log_topic(args)
        since = None if args.since is None else parse_time_ms(args.since)
        until = None if args.until is None else parse_time_ms(args.until)
    except ValueError as exc:  # LogTopicError among them
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    log_paths: list[str | Path] = list(args.log or [])
    unreadable: dict[str, str] = {}
    log_facts: Any = [str(Path(p).resolve()) for p in log_paths]
    if topic is not None:
        copied = _copy_topic(topic, out, args.media)
        if copied is None:
            return 1
        log_paths, unreadable = [copied.path], copied.unreadable
        log_facts = {
            "topic": topic.topic,
            "bootstrap_servers": topic.bootstrap_servers,
            "copy": str(copied.path),
            "messages": copied.messages,
            "events": copied.events,
            "offloaded_events": copied.offloaded,
            "damaged_messages": [str(d) for d in copied.damaged],
        }
    damaged: list[DamagedFile] = []
    try:
        runs = recorded_runs(log_paths, damaged)
    except FileNotFoundError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    for report in damaged:
        print(f"replay: warning: {report}", file=sys.stderr)
    keys = None if args.keys is None else {k for k in args.keys.split(",") if k}
    chosen = choose(runs, keys=keys, since_ms=since, until_ms=until, sample=args.sample)
    source = None if args.inputs_from is None else InputSource(args.inputs_from)
    lines, left_out = replay_lines(chosen, source, unreadable)
    missing = _copy_media(lines, production_media, spec.media_store)
    if missing:
        print(
            f"replay: warning: the media store {production_media} lacks {len(missing)} "
            "object(s) the recorded runs refer to; their runs fail with MediaNotFound",
            file=sys.stderr,
        )
    inputs.parent.mkdir(parents=True, exist_ok=True)
    inputs.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / "not_replayable.jsonl").write_text(
        "".join(entry.json() + "\n" for entry in left_out), encoding="utf-8"
    )
    manifest = {
        "log": log_facts,
        "spec": str(Path(args.spec).resolve()),
        "job": spec.name,
        "recorded_runs": len(runs),
        "chosen_runs": len(chosen),
        "replayed_runs": len(lines),
        "not_replayable": len(left_out),
        "parallelism": spec.parallelism,
    }
    print(
        f"replay: {len(runs)} recorded runs, {len(chosen)} chosen, {len(lines)} to replay, "
        f"{len(left_out)} not replayable ({out / 'not_replayable.jsonl'})",
        flush=True,
    )
    started = time.monotonic()
    if lines:
        failure = _run_job(loaded)
        if failure is not None:
            print(f"replay: the job failed: {loaded.redact(failure)}", file=sys.stderr)
            return 1
    manifest["wall_s"] = round(time.monotonic() - started, 3)
    (out / "replay.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(
        f"replay: done in {manifest['wall_s']:.1f} s: outputs {out / 'outputs'}, dead letters "
        f"{out / 'dead-letters'}, event log {out / 'eventlog'}",
        flush=True,
    )
    if not lines:
        return 0
    left = {entry.run_id for entry in left_out}
    replayed = {(run.key, run.input_id) for run in chosen if run.run_id not in left}
    return report_with_options(args, log_paths, [out / "eventlog"], out / "report", replayed)


def _copy_topic(topic: LogTopic, out: Path, media_root: str | None) -> TopicLog | None:
    """Copy the event-log topic into `out/recorded/` as an event-log file, reporting its
    damaged messages; None (and why, printed) when the copy job failed."""
    print(f"replay: copying the event log from {topic.describe()}", flush=True)
    messages = out / "recorded" / "messages"
    os.environ["PATH"] = interpreter_first(os.environ.get("PATH"))
    try:
        copy_topic(topic, messages)
    except Exception as exc:  # the copy job's failure, reported with its root cause
        cause = scrub(_root_cause(exc), topic.properties.values())  # a password, say
        print(f"replay: the copy of {topic.describe()} failed: {cause}", file=sys.stderr)
        return None
    root = media_root if media_root is not None else topic.media_root
    copied = write_topic_log(copied_messages(messages), out / "recorded", root)
    shutil.rmtree(messages)
    for report in copied.damaged:
        print(f"replay: warning: damaged message in {topic.describe()}: {report}", file=sys.stderr)
    if copied.damaged:
        print(
            f"replay: {len(copied.damaged)} damaged message(s); every other message was read",
            file=sys.stderr,
        )
    print(
        f"replay: {copied.messages} messages, {copied.events} events "
        f"({copied.offloaded} read whole from the media store) in {copied.path}",
        flush=True,
    )
    return copied


def _copy_media(lines: list[str], production: str, scratch: str) -> list[str]:
    """Copy the media the lines refer to from production's store (never created or written
    here: a local one that is not there holds nothing) into the replay's own."""
    if not lines:
        return []
    local = not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", production)
    source = None if local and not Path(production).is_dir() else MediaStore(production)
    return copy_media(lines, source, MediaStore(scratch))


def _root_cause(exc: Exception) -> str:
    """The last `Caused by:` line of a Flink job's failure, else its first line."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    causes = [line for line in lines if line.startswith("Caused by:")]
    return causes[-1] if causes else lines[0]


def _run_job(loaded: LoadedSpec) -> str | None:
    """Run the replay job on a local mini-cluster until its bounded input is answered;
    None, or the root cause of its failure."""
    os.environ["PATH"] = interpreter_first(os.environ.get("PATH"))
    from pyflink.datastream import StreamExecutionEnvironment  # needs the Flink gateway

    from streamagents.jobs.graph import build_job, flink_configuration

    spec = loaded.spec
    with demo_server(loaded.model) as demo_url:
        config = flink_configuration(spec, rest_port=free_port())
        config.set_string("restart-strategy.type", "none")
        env = StreamExecutionEnvironment.get_execution_environment(config)
        build_job(env, loaded, model_spec(loaded.model, demo_url), replay=True)
        try:
            env.execute(spec.name)
        except Exception as exc:  # the job's failure, reported with its root cause
            return _root_cause(exc)
    assert spec.event_log is not None and spec.event_log.path is not None
    finalize_in_progress(spec.event_log.path)
    return None
