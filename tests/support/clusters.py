"""A standalone Flink cluster that restarts failed jobs, and the REST figures of a restart,
for the tests that kill TaskManagers."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from streamagents.jobs.cluster import StandaloneCluster, rest_call

__all__ = ["cancel", "checkpoint_counts", "checkpoint_failures", "restarting_cluster", "restarts"]


@contextlib.contextmanager
def restarting_cluster(workdir: Path, taskmanagers: int = 2) -> Iterator[StandaloneCluster]:
    """JobManager + TaskManagers that restart a failed job (fixed delay, 20 attempts) and
    notice a killed TaskManager within seconds; always stopped, and checked gone, at exit."""
    conf = {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 20,
        "restart-strategy.fixed-delay.delay": "2 s",
        # Notice a killed TaskManager in seconds, not after the default 50 s.
        "heartbeat.interval": 2000,
        "heartbeat.timeout": 20000,
        # Fresh REST metrics: `submit --wait` sees a held bounded input answered sooner.
        "metrics.fetcher.update-interval": 1000,
    }
    handle = StandaloneCluster(workdir, taskmanagers=taskmanagers, conf=conf)
    try:
        yield handle.start(timeout_s=180)
    finally:
        handle.stop()
    assert handle.pids() == [], "cluster processes outlived the test"


def restarts(address: str, job_id: str) -> int:
    """The job's restart count (Flink's `numRestarts` job metric)."""
    reply = rest_call(address, f"/jobs/{job_id}/metrics?get=numRestarts", timeout_s=10)
    return int(float(reply[0]["value"])) if reply else 0


def checkpoint_counts(address: str, job_id: str) -> dict[str, int]:
    """The job's checkpoint counts (`completed`, `failed`, `restored`, ...); empty if unknown."""
    try:
        return dict(rest_call(address, f"/jobs/{job_id}/checkpoints", timeout_s=10)["counts"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return {}


def checkpoint_failures(address: str, job_id: str) -> list[str]:
    """Why the failed checkpoints still in the job's history failed (Flink keeps the last few)."""
    try:
        history = rest_call(address, f"/jobs/{job_id}/checkpoints", timeout_s=10)["history"]
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return []
    return [
        f"{entry.get('id')}: {entry.get('failure_message')}"
        for entry in history
        if entry.get("status") == "FAILED"
    ]


def cancel(address: str, job_id: str) -> None:
    """Cancel the job (REST `PATCH /jobs/<id>`)."""
    request = urllib.request.Request(f"http://{address}/jobs/{job_id}", method="PATCH")
    urllib.request.urlopen(request, timeout=10).close()
