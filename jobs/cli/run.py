"""`streamagents validate | run | submit | savepoint`: check a spec, run it, resume it.

`run` executes on a local mini-cluster and prints progress while it runs and a summary at
the end; `submit` hands the job to a running Flink cluster through `flink run -py`;
`savepoint` stops a job with a savepoint through the REST API (PyFlink 2.3's own
`stop_with_savepoint` is broken), and `run --from-savepoint` resumes from one. `run` keeps
its checkpoints in the job's folder, and running the same spec again continues where the
last run left off unless that run finished (`--fresh` starts over; see `jobs.cluster.resume`).

A bounded input (files, not watched) is held open while `run` or `submit --wait` follows
the job, and the command ends the job with a draining savepoint once every input is
answered, so the last runs finish under regular checkpoints (see `jobs.cluster.job_stop`).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from streamagents.connectors.eventlog import finalize_in_progress
from streamagents.connectors.mcp_servers import McpHttp
from streamagents.connectors.providers import adapter_module
from streamagents.jobs.cli.progress import (
    TERMINAL_STATES,
    Progress,
    job_state,
    latest_failure,
    latest_savepoint,
    read_progress,
    summary,
)
from streamagents.jobs.cluster.job_stop import StopError, finish_when_answered, stop_with_savepoint
from streamagents.jobs.cluster.local_jvm import start_in_background, warm_task_python
from streamagents.jobs.cluster.resume import (
    Attempt,
    Ending,
    JobFolder,
    Start,
    plan_start,
    spec_digest,
)
from streamagents.jobs.cluster.standalone import (
    flink_home,
    free_port,
    script_environment,
)
from streamagents.jobs.graph import bounded_input
from streamagents.jobs.model_choice import demo_banner, demo_server, model_spec
from streamagents.jobs.spec import JobSpec, LoadedSpec, SpecError, check_runnable, load_spec
from streamagents.operators.agent.config import ModelSpec, TelemetryConfig

if TYPE_CHECKING:
    from pyflink.common import Configuration

__all__ = ["register"]

OPERATORS_MODULE = "streamagents.operators.flink"
"""The package whose functions every job's tasks run."""
_JOB_ID = re.compile(r"JobID ([0-9a-f]{32})")
# How fresh the local mini-cluster's REST metrics are, and how often `run` looks whether a
# held input is answered: idle metrics count 0.2 + 2 x 0.1 s after its source finished.
_LOCAL_FETCH_INTERVAL_S = 0.2
_LOCAL_POLL_S = 0.1


def register(subparsers: Any) -> None:
    """Add the validate, run, submit and savepoint sub-commands."""
    validate = subparsers.add_parser(
        "validate", help="Check a job spec and import its tools, without starting Flink."
    )
    validate.add_argument("spec", help="Path of the YAML job spec.")
    validate.set_defaults(handler=_validate)

    run = subparsers.add_parser("run", help="Run a job spec on the local mini-cluster.")
    run.add_argument("spec", help="Path of the YAML job spec.")
    run.add_argument(
        "--from-savepoint", metavar="PATH", help="Resume from this savepoint or checkpoint."
    )
    run.add_argument(
        "--fresh",
        action="store_true",
        help="Start over: do not continue the previous run of this job; delete its checkpoints.",
    )
    run.add_argument(
        "--progress-interval", type=float, default=2.0, metavar="S", help="Seconds per update."
    )
    run.set_defaults(handler=_run)

    submit = subparsers.add_parser("submit", help="Submit a job spec to a running Flink cluster.")
    submit.add_argument("spec", help="Path of the YAML job spec.")
    submit.add_argument(
        "--jobmanager", required=True, metavar="HOST:PORT", help="The cluster's REST address."
    )
    submit.add_argument("--from-savepoint", metavar="PATH", help="Resume from this savepoint.")
    submit.add_argument(
        "--wait", action="store_true", help="Stay until the job ends, printing progress."
    )
    submit.set_defaults(handler=_submit)

    savepoint = subparsers.add_parser(
        "savepoint", help="Stop a running job with a savepoint and print its path."
    )
    savepoint.add_argument("job_id", help="The job id `run` or `submit` printed.")
    savepoint.add_argument(
        "--jobmanager", required=True, metavar="HOST:PORT", help="The REST address."
    )
    savepoint.add_argument(
        "--target-dir", default="savepoints", help="Directory (or URI) for the savepoint."
    )
    savepoint.add_argument(
        "--drain",
        action="store_true",
        help="Finish every input first (ends a held bounded input whose command has gone).",
    )
    savepoint.add_argument("--timeout", type=float, default=300.0, help="Seconds to wait.")
    savepoint.set_defaults(handler=_savepoint)


def _load(path: str) -> LoadedSpec | None:
    try:
        loaded = load_spec(path)
        check_runnable(loaded)
    except SpecError as exc:
        print(f"invalid job spec:\n{exc}", file=sys.stderr)
        return None
    return loaded


def _describe_model(loaded: LoadedSpec) -> str:
    entry = loaded.model
    if entry.provider == "demo":
        return f"demo {entry.model} (scripted test double, not an LLM)"
    chain = "".join(f", then {f.provider} {f.model}" for f in entry.fallbacks)
    return f"{entry.provider} {entry.model}{chain}"


def _validate(args: argparse.Namespace) -> int:
    loaded = _load(args.spec)
    if loaded is None:
        return 2
    spec = loaded.spec
    source = spec.source.files.path if spec.source.files else f"kafka {spec.source.kafka.topics}"
    tools = [
        t.ref + (" (approval required)" * (t.approval == "required")) for t in spec.agent.tools
    ]
    lines = [
        f"{loaded.path}: valid",
        f"  job        {spec.name} (parallelism {spec.parallelism})",
        f"  source     {source}",
        f"  key        {spec.key}",
        f"  model      {_describe_model(loaded)}",
        f"  tools      {', '.join(tools) or 'none'}",
        f"  outputs    {spec.sinks.outputs.describe()}",
        f"  dead       {spec.sinks.dead_letters.describe()}",
    ]
    if spec.sinks.approval_requests is not None:
        lines.append(f"  approvals  requests to {spec.sinks.approval_requests.describe()}")
    if spec.event_log is not None:
        lines.append(f"  event log  {spec.event_log.describe()} ({spec.event_log.level})")
    if loaded.telemetry is not None:
        lines.append(f"  telemetry  {_describe_telemetry(loaded.telemetry)}")
    # A path or URL may hold an ${ENV} value or a password of its own: neither is shown.
    print(loaded.redact("\n".join(lines)))
    for warning in _cleartext_credentials(loaded):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _cleartext_credentials(loaded: LoadedSpec) -> list[str]:
    """What sends credentials (headers, or a URL's user info) over plain `http://` to a
    host other than this machine, where anyone on the path can read them."""
    found = [
        (f"MCP server {server.name!r}", server.transport.url, bool(server.transport.headers))
        for server in loaded.spec.agent.mcp_servers
        if isinstance(server.transport, McpHttp)
    ]
    if loaded.telemetry is not None:
        telemetry = loaded.telemetry
        found.append(("telemetry", telemetry.otlp_endpoint, bool(telemetry.headers)))
    warnings = []
    for what, url, has_headers in found:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        loopback = host == "localhost" or host == "::1" or host.startswith("127.")
        if parts.scheme == "http" and not loopback and (has_headers or parts.username):
            warnings.append(
                f"{what} sends credentials over plain http to {host}: use https, or a "
                "collector or server on this machine"
            )
    return warnings


def _describe_telemetry(telemetry: TelemetryConfig) -> str:
    """Where spans and metrics go, for a person: the collector's host (no user info, no
    header values), the sample ratio, whether content is captured."""
    url = urlsplit(telemetry.otlp_endpoint)
    content = "with content" if telemetry.capture_content else "no content"
    return (
        f"OTLP to {url.scheme}://{url.hostname}{f':{url.port}' if url.port else ''} "
        f"(sample {telemetry.sample_ratio:g}, {content}, headers: "
        f"{', '.join(sorted(telemetry.headers)) or 'none'})"
    )


def _watch(
    rest_address: str,
    job_id: str,
    interval_s: float,
    done: threading.Event,
    loaded: LoadedSpec,
) -> Progress | None:
    """Print a progress line whenever it changes, and each new task failure (Flink restarts
    the job after one), until `done` is set; returns the last progress read."""
    started = time.monotonic()
    last: Progress | None = None
    failure_seen = 0
    while not done.wait(interval_s):
        current = read_progress(rest_address, job_id)
        if current is not None and last is not None and last.records_in:
            # A source that has finished (a held bounded input) may no longer report it.
            records_in = max(current.records_in or 0, last.records_in)
            current = dataclasses.replace(current, records_in=records_in)
        if current is not None and (last is None or current.line() != last.line()):
            print(f"[{time.monotonic() - started:7.1f}s] {current.line()}", flush=True)
            last = current
        failure = latest_failure(rest_address, job_id)
        if failure is not None and failure[0] > failure_seen:
            failure_seen = failure[0]
            print(f"task failed, Flink restarts it: {loaded.redact(failure[1])}", flush=True)
    return last


def _end_when_answered(
    rest_address: str,
    job_id: str,
    target: str,
    done: threading.Event,
    answered: threading.Event | None = None,
    poll_s: float = 0.25,
    fetch_interval_s: float | None = None,
) -> None:
    """Start the thread that ends a job with a held bounded input once it is answered
    (setting `answered` as it does), looking every `poll_s` seconds; `fetch_interval_s` is
    the cluster's metrics fetch interval when the caller set it (see
    `finish_when_answered`)."""

    def announce() -> None:
        if answered is not None:
            answered.set()
        print("every input answered: stopping the job with a draining savepoint", flush=True)

    threading.Thread(
        target=finish_when_answered,
        args=(rest_address, job_id, target, done),
        kwargs={"announce": announce, "poll_s": poll_s, "fetch_interval_s": fetch_interval_s},
        name="input-end",
        daemon=True,
    ).start()


def _final_savepoints(spec: JobSpec, scratch: str) -> str:
    """Where the draining savepoint that ends a held job goes: beside the checkpoints, or
    in `scratch` when the spec names no checkpoint directory."""
    checkpoints = spec.checkpointing.dir
    return scratch if checkpoints is None else f"{checkpoints.rstrip('/')}/end-of-input"


def _run(args: argparse.Namespace) -> int:
    loaded = _load(args.spec)
    if loaded is None:
        return 2
    # The local mini-cluster's JVM inherits this process's environment (this interpreter
    # first on PATH, for its thread-mode workers): `main` started launching it with that
    # environment already, unless `_run` was called some other way.
    start_in_background()
    # Imported here: validate and submit need no Flink gateway in this process.
    from pyflink.datastream import StreamExecutionEnvironment

    from streamagents.jobs.graph import build_job, flink_configuration

    spec = loaded.spec
    folder, digest = JobFolder.of(loaded), spec_digest(loaded)
    start = _where_to_start(args, folder, digest)
    if start.refusal is not None:
        print(loaded.redact(start.refusal), file=sys.stderr)
        return 2
    if start.message is not None:
        print(loaded.redact(start.message), flush=True)
    restore_from = start.restore_from
    checkpoints = spec.checkpointing.dir or str(folder.default_checkpoints)
    demo = loaded.model.provider == "demo"
    if demo:
        print(demo_banner(loaded.model), flush=True)
    started = time.monotonic()
    hold = bounded_input(spec)
    answered = threading.Event()
    with demo_server(loaded.model) as demo_url, tempfile.TemporaryDirectory() as scratch:
        model = model_spec(loaded.model, demo_url)
        warm_task_python(_task_modules(model))
        port = free_port()
        config = flink_configuration(
            spec, rest_port=port, restore_from=restore_from, checkpoint_dir=checkpoints
        )
        _local_run_settings(config)
        env = StreamExecutionEnvironment.get_execution_environment(config)
        build_job(env, loaded, model, hold_input_end=hold)
        client = env.execute_async(spec.name)
        job_id = str(client.get_job_id())
        folder.begin(
            Attempt(
                job_id=job_id,
                checkpoints=checkpoints,
                restored_from=restore_from,
                spec_sha256=digest,
            )
        )
        print(
            f"job {job_id} ({spec.name}) started on the local mini-cluster, model "
            f"{_describe_model(loaded)}\n"
            f"  stop with a savepoint: streamagents savepoint {job_id} --jobmanager "
            f"localhost:{port} --target-dir {folder.savepoints}   (Ctrl-C cancels)",
            flush=True,
        )
        done = threading.Event()
        failure: list[BaseException] = []

        def wait_for_result() -> None:
            try:
                client.get_job_execution_result().result()
            except BaseException as exc:  # reported below, after the watcher stops
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=wait_for_result, name="job-result", daemon=True).start()
        savepoints: list[str] = []
        _note_savepoints(f"localhost:{port}", job_id, done, savepoints)
        if hold:
            _end_when_answered(
                f"localhost:{port}",
                job_id,
                scratch,
                done,
                answered,
                poll_s=_LOCAL_POLL_S,
                fetch_interval_s=_LOCAL_FETCH_INTERVAL_S,
            )
        try:
            last = _watch(f"localhost:{port}", job_id, args.progress_interval, done, loaded)
            state = "FAILED" if failure else "FINISHED"
        except KeyboardInterrupt:
            print("interrupted: cancelling the job", file=sys.stderr)
            client.cancel().result()
            last, state = None, "CANCELED"
        ending = _ending(state, answered.is_set())
        stopped_at = savepoints[-1] if savepoints else folder.newest_savepoint(job_id)
        folder.end(job_id, ending, stopped_at if ending == "stopped" else None)
        # Ended by its own draining savepoint, whose result it has read: no `savepoint`
        # command is waiting on the local cluster, so the process may end at once.
        args.exit_at_once = ending == "finished"
    if spec.event_log is not None and spec.event_log.path is not None:
        # Flink calls a Python function's close() only at the end of a bounded input, so a
        # job stopped with a savepoint or cancelled leaves its event-log files in progress;
        # the job is over and no writer is left, so give them their finished names now.
        finalize_in_progress(spec.event_log.path)
    print(loaded.redact(summary(spec, state, time.monotonic() - started, last)))
    if demo:
        print("  model         DEMO - answers came from a scripted test double, not an LLM")
    if state in ("CANCELED", "FAILED"):
        print(f"  continue      streamagents run {args.spec}   (from its latest checkpoint)")
    if state == "CANCELED":
        return 130
    if failure:
        lines = str(failure[0]).splitlines() or [type(failure[0]).__name__]
        causes = [line for line in lines if line.startswith("Caused by:")]
        root = causes[-1] if causes else lines[0]
        print(f"job failed: {loaded.redact(root)}", file=sys.stderr)
        if restore_from is not None:
            print(
                f"  it was restored from {restore_from}: if the spec changed so that this state "
                "no longer fits the job, start over with --fresh",
                file=sys.stderr,
            )
        return 1
    return 0


def _local_run_settings(config: Configuration) -> None:
    """Add to `config` what a local run needs beyond its spec's settings."""
    # Checkpoints outlive a cancelled job (and a dead process): the next run continues.
    config.set_string(
        "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION"
    )
    # A local run gives up after a few failures in a row instead of restarting forever.
    config.set_string("restart-strategy.type", "fixed-delay")
    config.set_string("restart-strategy.fixed-delay.attempts", "3")
    config.set_string("restart-strategy.fixed-delay.delay", "2 s")
    # Fresh metrics: progress lines, and the end of a held input confirmed within half a
    # second of its source's finish (a fetch interval plus two polls of
    # `finish_when_answered`).
    config.set_string(  # milliseconds, as Flink reads a bare number here
        "metrics.fetcher.update-interval", str(int(_LOCAL_FETCH_INTERVAL_S * 1000))
    )
    # Fresh job details: the REST API serves them from a cache that lives
    # `web.refresh-interval` (3 s) unless told otherwise, which delayed seeing the held
    # input's source finish by up to that long.
    config.set_string("rest.cache.execution-graph.timeout", f"{int(_LOCAL_POLL_S * 1000)} ms")


def _task_modules(model: ModelSpec) -> list[str]:
    """What the job's tasks import beyond PyFlink: the operators and each model's adapter,
    with its SDK."""
    adapters = {adapter_module(target.provider) for target in model.chain()}
    return [OPERATORS_MODULE, *sorted(a for a in adapters if a is not None)]


def _where_to_start(args: argparse.Namespace, folder: JobFolder, digest: str) -> Start:
    """What the run restores: the savepoint named, nothing with `--fresh` (forgetting the
    earlier runs), else what the job's record says (`jobs.cluster.resume.plan_start`)."""
    if args.from_savepoint:
        return Start(str(args.from_savepoint), None)
    if args.fresh:
        message = "starting over (--fresh): the earlier runs' checkpoints are deleted"
        start = Start(None, message if folder.attempts() else None)
        folder.forget()
        return start
    return plan_start(folder, digest)


def _ending(state: str, answered: bool) -> Ending:
    """How a run ended, for the job's record: a FINISHED job either had its bounded input
    answered or was stopped with a savepoint by someone."""
    if state == "FINISHED":
        return "finished" if answered else "stopped"
    return "canceled" if state == "CANCELED" else "failed"


def _note_savepoints(
    rest_address: str, job_id: str, done: threading.Event, found: list[str]
) -> None:
    """Start a thread that notes each savepoint the job completes, until `done` is set. A
    stop with a savepoint ends the job, and the local cluster with it, right after: a
    savepoint not seen in time is looked for where the printed stop command puts it."""

    def poll() -> None:
        while not done.wait(0.5):
            location = latest_savepoint(rest_address, job_id)
            if location is not None and location not in found:
                found.append(location)

    threading.Thread(target=poll, name="savepoints", daemon=True).start()


def _submit(args: argparse.Namespace) -> int:
    loaded = _load(args.spec)
    if loaded is None:
        return 2
    demo = loaded.model.provider == "demo"
    if demo:
        print(demo_banner(loaded.model), flush=True)
        print("the demo model runs in this process: staying until the job ends", flush=True)
    entry = Path(__file__).resolve().parents[1] / "flink_entry.py"
    follow = demo or args.wait
    with demo_server(loaded.model) as demo_url, tempfile.TemporaryDirectory() as scratch:
        command = [
            "bash",
            str(flink_home() / "bin" / "flink"),
            "run",
            "-m",
            args.jobmanager,
            "-d",
            "-pyclientexec",
            sys.executable,
            "-py",
            str(entry),
        ]
        if args.from_savepoint:
            command += ["-s", args.from_savepoint]
        command += ["--spec", str(loaded.path)]
        if demo_url is not None:
            command += ["--demo-url", demo_url]
        if follow:  # the command stays, so it can end a held bounded input
            command += ["--hold-input-end"]
        result = subprocess.run(
            command, env=script_environment(), capture_output=True, text=True, check=False
        )
        found = _JOB_ID.search(result.stdout + result.stderr)
        if result.returncode != 0 or found is None:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
            print(f"submission failed:\n{loaded.redact(tail)}", file=sys.stderr)
            return 1
        job_id = found.group(1)
        print(job_id, flush=True)
        if not follow:
            return 0
        return _follow(args.jobmanager, job_id, loaded, _final_savepoints(loaded.spec, scratch))


def _follow(rest_address: str, job_id: str, loaded: LoadedSpec, final_savepoints: str) -> int:
    """Print progress of a cluster job until it ends (ending it when its held bounded
    input is answered); exit code 0 only when it FINISHED."""
    started = time.monotonic()
    done = threading.Event()
    states: list[str | None] = []

    def poll_state() -> None:
        while not done.is_set():
            state = job_state(rest_address, job_id)
            states.append(state)
            if state in TERMINAL_STATES:
                done.set()
            time.sleep(1.0)

    threading.Thread(target=poll_state, name="job-state", daemon=True).start()
    if bounded_input(loaded.spec):
        _end_when_answered(rest_address, job_id, final_savepoints, done)
    last = _watch(rest_address, job_id, 2.0, done, loaded)
    state = states[-1] or "UNKNOWN"
    print(loaded.redact(summary(loaded.spec, state, time.monotonic() - started, last)))
    return 0 if state == "FINISHED" else 1


def _savepoint(args: argparse.Namespace) -> int:
    try:
        location = stop_with_savepoint(
            args.jobmanager, args.job_id, args.target_dir, drain=args.drain, timeout_s=args.timeout
        )
    except StopError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(location)
    return 0
