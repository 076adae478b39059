"""`streamagents cluster start | stop`: a Flink session cluster on this machine, no docker."""

from __future__ import annotations

import argparse
from typing import Any

from streamagents.jobs.cluster.standalone import (
    SLOTS_PER_TASKMANAGER,
    ClusterError,
    StandaloneCluster,
)

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add `cluster start` and `cluster stop`."""
    cluster = subparsers.add_parser(
        "cluster", help="Start or stop a standalone Flink cluster on 127.0.0.1."
    )
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="Start a JobManager and TaskManagers.")
    start.add_argument("--dir", default=".flink-cluster", help="Configuration, logs and pids.")
    start.add_argument("--taskmanagers", type=int, default=2, help="How many TaskManagers.")
    start.add_argument(
        "--slots",
        type=int,
        default=SLOTS_PER_TASKMANAGER,
        help="Task slots per TaskManager (keep one TaskManager's worth free for a fast restart).",
    )
    start.set_defaults(handler=_start)
    stop = actions.add_parser("stop", help="Stop the cluster started in --dir.")
    stop.add_argument("--dir", default=".flink-cluster", help="As given to `cluster start`.")
    stop.set_defaults(handler=_stop)


def _start(args: argparse.Namespace) -> int:
    cluster = StandaloneCluster(
        args.dir, taskmanagers=args.taskmanagers, slots_per_taskmanager=args.slots
    )
    try:
        cluster.start()
    except ClusterError as exc:
        print(exc)
        return 1
    print(f"Flink cluster ready: REST API and web UI at http://{cluster.rest_address}")
    print(f"  submit:  streamagents submit SPEC --jobmanager {cluster.rest_address}")
    print(f"  stop:    streamagents cluster stop --dir {args.dir}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    cluster = StandaloneCluster(args.dir)
    cluster.stop()
    print(f"stopped the Flink cluster in {cluster.workdir}")
    return 0
