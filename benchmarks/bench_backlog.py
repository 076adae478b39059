"""Benchmark of checkpoints while a backlog waits: how soon outputs are committed.

A standalone cluster (2 TaskManagers, one slot each) runs a job at parallelism 2 whose file
source already holds the whole backlog (default 4,000 inputs over 400 keys), with a
200 ms test-double model, `max_in_flight` 8 and a checkpoint every 2 s. For each mode it
prints, side by side: when the first checkpoint completed, the end-to-end durations of
the later ones (median and max), their largest checkpointed size, how long produced
outputs waited to be committed (the longest lag seen), turns/s, and every checkpoint.
Then, in the default mode, inputs arriving at a steady rate below capacity (30/s): the
time from arrival to answer and to the committed output.

Then the end of a bounded input: a folder whose inputs all fit in keyed state (default
2,000 inputs over 8 keys, so the source finishes with nearly all of them waiting), once as
a detached `submit` (the last runs finish inside the final watermark) and once with
`submit --wait` (the input is held open and the command ends the job when every input is
answered): the checkpoints completed after the source read everything, and how many calls
a failure just before the last answer would make again.

Modes: `aligned` (Flink's default), `aligned+debloat` (with network buffer debloating),
`unaligned`, and `unaligned+debloat` (what `streamagents run`, `submit` and
`streamagents cluster start` set up by default).

Run: `python benchmarks/bench_backlog.py` (about 10 minutes);
`--inputs 20000 --modes unaligned+debloat` for the long backlog in the default mode;
`--modes "" --steady-rate 0` for the end of a bounded input alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from backlog_scenario import (
    BacklogWatch,
    CountingTestModel,
    add_inputs,
    commit_lag_s,
    input_id,
    source_finished,
    submit,
    submit_and_follow,
    write_backlog_spec,
)

from streamagents.connectors.files import read_jsonl
from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.jobs.cluster.standalone import StandaloneCluster
from streamagents.operators.flink import BUFFER_DEBLOAT

STEADY_PERIOD_S = 2.0
MODES = {
    "aligned": (False, False),
    "aligned+debloat": (False, True),
    "unaligned": (True, False),
    "unaligned+debloat": (True, True),
}
"""Each mode: (unaligned checkpoints, buffer debloating). The last is the default."""


def run_mode(mode: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Run the backlog job once in `mode`; its figures."""
    unaligned, debloat = MODES[mode]
    cluster = StandaloneCluster(workdir / "cluster", taskmanagers=2, conf={BUFFER_DEBLOAT: debloat})
    model = CountingTestModel(args.latency_ms / 1000)
    with LoopbackStubServer(model) as stub:
        cluster.start(timeout_s=180)
        try:
            spec = write_backlog_spec(
                workdir / "job",
                stub.url,
                inputs=args.inputs,
                keys=args.keys,
                max_in_flight=args.max_in_flight,
                interval_s=args.interval_s,
                unaligned=unaligned,
                extra_agent=args.agent,
            )
            watch = BacklogWatch(
                cluster.rest_address,
                submit(spec, cluster.rest_address),
                workdir / "job" / "out" / "answers",
                model,
            )
            watch.wait_until(lambda s: s.committed >= args.inputs, timeout_s=args.timeout_s)
            watch.sample()
        finally:
            cluster.stop()
    completed = watch.completed_checkpoints()
    first_done = next((s.at_s for s in watch.samples if s.committed), None)
    later = [c["end_to_end_duration"] / 1000 for c in completed[1:]]
    wall = watch.samples[-1].at_s
    return {
        "mode": mode,
        "checkpoints completed": len(completed),
        "checkpoints failed": sum(1 for c in watch.checkpoints.values() if c["status"] == "FAILED"),
        "first checkpoint done (s)": round(completed[0]["end_to_end_duration"] / 1000, 1)
        if completed
        else None,
        "later checkpoints median (s)": round(statistics.median(later), 2) if later else None,
        "later checkpoints max (s)": round(max(later), 2) if later else None,
        "largest checkpoint (KiB)": round(max(c["checkpointed_size"] for c in completed) / 1024)
        if completed
        else None,
        "first output committed at (s)": first_done,
        "commit lag max (s)": commit_lag_s(watch.samples),
        "turns/s": round(args.inputs / wall, 1),
        "model calls": sum(model.calls.values()),
        "history": [
            (
                c["id"],
                c["status"],
                round(c.get("end_to_end_duration", 0) / 1000, 2),
                round(c.get("checkpointed_size", 0) / 1024),
            )
            for _, c in sorted(watch.checkpoints.items())
        ],
    }


def run_steady(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Feed inputs at a steady rate below capacity (the default mode); the time from an
    input's file appearing to its answer (what a sink that is not transactional sees) and
    to its output being committed by the file sink."""
    model = CountingTestModel(args.latency_ms / 1000)
    cluster = StandaloneCluster(workdir / "cluster", taskmanagers=2)
    job = workdir / "job"
    written: dict[str, float] = {}
    committed_at: dict[str, float] = {}
    batch = max(1, round(args.steady_rate * STEADY_PERIOD_S))
    total = batch * args.steady_batches
    with LoopbackStubServer(model) as stub:
        cluster.start(timeout_s=180)
        try:
            spec = write_backlog_spec(
                job,
                stub.url,
                inputs=0,
                keys=args.keys,
                max_in_flight=args.max_in_flight,
                interval_s=args.interval_s,
                watch_interval_s=0.5,
            )
            watch = BacklogWatch(
                cluster.rest_address,
                submit(spec, cluster.rest_address),
                job / "out" / "answers",
                model,
            )
            watch.wait_until(lambda s: watch.state() == "RUNNING", timeout_s=180)
            next_batch, next_at = 0, time.monotonic()
            while len(committed_at) < total:
                now = time.monotonic()
                if next_batch < args.steady_batches and now >= next_at:
                    numbers = range(next_batch * batch, (next_batch + 1) * batch)
                    add_inputs(job, f"batch-{next_batch:04d}", numbers, args.keys)
                    written.update((input_id(n), now) for n in numbers)
                    next_batch, next_at = next_batch + 1, next_at + STEADY_PERIOD_S
                for record in read_jsonl(watch.answers) if watch.answers.exists() else []:
                    committed_at.setdefault(record["id"], time.monotonic())
                if now - watch.started > args.timeout_s:
                    raise TimeoutError(f"{len(committed_at)} of {total} committed")
                time.sleep(0.25)
        finally:
            cluster.stop()

    def spread(seconds: list[float]) -> str:
        ranked = sorted(seconds)
        return (
            f"{statistics.median(ranked):.2f} / {ranked[int(0.95 * (len(ranked) - 1))]:.2f}"
            f" / {ranked[-1]:.2f}"
        )

    return {
        "inputs": total,
        "rate (inputs/s)": round(batch / STEADY_PERIOD_S, 1),
        "arrival to answer, s (median / p95 / max)": spread(
            [model.first_answer[i] - written[i] for i in written]
        ),
        "arrival to committed, s (median / p95 / max)": spread(
            [committed_at[i] - written[i] for i in written]
        ),
    }


def run_tail(held: bool, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A bounded input that fits in keyed state, detached (`held` false: the last runs
    finish inside the final watermark) or followed by `submit --wait` (held open)."""
    model = CountingTestModel(args.latency_ms / 1000)
    cluster = StandaloneCluster(
        workdir / "cluster", taskmanagers=2, conf={"metrics.fetcher.update-interval": 1000}
    )
    job = workdir / "job"
    with LoopbackStubServer(model) as stub:
        cluster.start(timeout_s=180)
        follower = None
        try:
            spec = write_backlog_spec(
                job,
                stub.url,
                inputs=args.tail_inputs,
                keys=args.tail_keys,
                max_in_flight=args.max_in_flight,
                interval_s=args.interval_s,
                extra_agent={"max_waiting_inputs": args.tail_inputs},
            )
            if held:
                follower, job_id = submit_and_follow(spec, cluster.rest_address, workdir / "log")
            else:
                job_id = submit(spec, cluster.rest_address)
            watch = BacklogWatch(cluster.rest_address, job_id, job / "out" / "answers", model)
            watch.wait_until(
                lambda s: source_finished(cluster.rest_address, job_id), args.timeout_s
            )
            source_done = (watch.samples[-1].at_s, model.answered)
            watch.wait_until(lambda s: False, timeout_s=args.timeout_s)
            if follower is not None:
                follower.wait(timeout=120)
        finally:
            if follower is not None and follower.poll() is None:
                follower.kill()
            cluster.stop()
    # Checkpoint times are epoch ms; answers are monotonic: bring them to the same clock.
    offset = time.time() - time.monotonic()
    answers = sorted(at + offset for at in model.first_answer.values())
    acks = [c["latest_ack_timestamp"] / 1000 for c in watch.completed_checkpoints()]
    last_answer = answers[-1]
    protected = max((ack for ack in acks if ack <= last_answer), default=0.0)
    return {
        "mode": "held (submit --wait)" if held else "detached (final drain)",
        "source FINISHED at (s)": source_done[0],
        "answered then": source_done[1],
        "last answer at (s)": round(last_answer - offset - watch.started, 1),
        "job ended at (s)": watch.samples[-1].at_s,
        "checkpoints after it": sum(
            1 for ack in acks if ack - offset - watch.started > source_done[0]
        ),
        "unprotected before the end (s)": round(last_answer - protected, 1),
        "calls a failure then redoes": sum(1 for at in answers if at > protected),
        "model calls": sum(model.calls.values()),
    }


def main() -> None:
    """Run each mode and print the figures side by side, then each checkpoint history."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=4000)
    parser.add_argument("--keys", type=int, default=400)
    parser.add_argument("--max-in-flight", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--interval-s", type=float, default=2.0)
    parser.add_argument("--timeout-s", type=float, default=1800)
    parser.add_argument("--steady-rate", type=float, default=30.0, help="inputs/s, 0: skip")
    parser.add_argument("--steady-batches", type=int, default=20)
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--tail-inputs", type=int, default=2000, help="0: skip")
    parser.add_argument("--tail-keys", type=int, default=8)
    args = parser.parse_args()
    args.agent = {}
    results = []
    for mode in filter(None, args.modes.split(",")):
        with tempfile.TemporaryDirectory(prefix=f"bench-backlog-{mode}-") as tmp:
            started = time.monotonic()
            results.append(run_mode(mode, args, Path(tmp)))
            print(f"{mode}: done in {time.monotonic() - started:.0f}s", flush=True)
    if results:
        print(
            f"\n{args.inputs} inputs over {args.keys} keys, p=2 on 2 TaskManagers, "
            f"max_in_flight {args.max_in_flight}, {args.latency_ms} ms model, "
            f"checkpoint every {args.interval_s} s"
        )
        names = [name for name in results[0] if name not in ("mode", "history")]
        print(f"{'':32}" + "".join(f"{r['mode']:>19}" for r in results))
        for name in names:
            print(f"{name:32}" + "".join(f"{r[name]!s:>19}" for r in results))
        for result in results:
            print(f"\n{result['mode']} checkpoints (id, status, end-to-end s, KiB):")
            print("  " + ", ".join(str(entry) for entry in result["history"]))
    if args.steady_rate > 0:
        with tempfile.TemporaryDirectory(prefix="bench-backlog-steady-") as tmp:
            steady = run_steady(args, Path(tmp))
        print(
            f"\nsteady load, default mode: inputs arrive in files every {STEADY_PERIOD_S} s"
            " (file-sink outputs are committed on checkpoint; a sink that is not"
            " transactional gets each answer at once)"
        )
        for name, value in steady.items():
            print(f"  {name:46}{value}")
    if args.tail_inputs > 0:
        tails = []
        for held in (False, True):
            with tempfile.TemporaryDirectory(prefix="bench-backlog-tail-") as tmp:
                tails.append(run_tail(held, args, Path(tmp)))
        print(
            f"\nend of a bounded input: {args.tail_inputs} inputs over {args.tail_keys} keys,"
            " all waiting in keyed state when the source has read them"
        )
        print(f"  {'':34}" + "".join(f"{t['mode']:>24}" for t in tails))
        for name in [name for name in tails[0] if name != "mode"]:
            print(f"  {name:34}" + "".join(f"{t[name]!s:>24}" for t in tails))


if __name__ == "__main__":
    main()
