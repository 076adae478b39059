"""A standalone Flink cluster that restarts failed jobs, killing one of its TaskManagers, and
the REST figures of a restart, for the tests that kill TaskManagers; what makes such a
cluster ready for the next test (a killed TaskManager replaced and forgotten)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from streamagents.jobs.cluster.standalone import StandaloneCluster, flink_home, rest_call

__all__ = [
    "cancel",
    "cancel_unfinished_jobs",
    "checkpoint_counts",
    "checkpoint_failures",
    "kill_taskmanager",
    "replace_lost_taskmanagers",
    "restarting_cluster",
    "restarts",
    "seconds_until_forgotten",
    "wait_until_idle",
]


_replacements: dict[int, list[subprocess.Popen[bytes]]] = {}
"""The TaskManager scripts `replace_lost_taskmanagers` started, per cluster (by `id`)."""


@contextlib.contextmanager
def restarting_cluster(workdir: Path, taskmanagers: int = 2) -> Iterator[StandaloneCluster]:
    """JobManager + TaskManagers that notice a killed TaskManager and restart the job as every
    cluster `StandaloneCluster` writes does (within seconds, on the free slot each TaskManager
    keeps), giving up after 20 failures in a row; always stopped, and checked gone, at exit."""
    conf = {
        "restart-strategy.exponential-delay.attempts-before-reset-backoff": 20,
        # Fresh REST metrics: `submit --wait` sees a held bounded input answered sooner.
        "metrics.fetcher.update-interval": 1000,
    }
    handle = StandaloneCluster(workdir, taskmanagers=taskmanagers, conf=conf)
    try:
        yield handle.start(timeout_s=300)
    finally:
        for script in _replacements.pop(id(handle), []):
            # A replacement whose script has not written its pid yet would outlive stop().
            with contextlib.suppress(subprocess.TimeoutExpired):
                script.wait(timeout=180)
        handle.stop()
    assert handle.pids() == [], "cluster processes outlived the test"


def kill_taskmanager(cluster: StandaloneCluster) -> int:
    """`kill -9` the cluster's oldest TaskManager once each TaskManager runs one slot of the
    job (the cluster spreads a job's slots, so the one killed runs a subtask and the others
    keep a free slot for the restart). Returns how many TaskManagers were registered."""
    managers = rest_call(cluster.rest_address, "/taskmanagers", timeout_s=10)["taskmanagers"]
    used = [manager["slotsNumber"] - manager["freeSlots"] for manager in managers]
    assert used == [1] * cluster.taskmanagers, f"slots in use per TaskManager: {used}"
    os.kill(cluster.taskmanager_pids()[0], signal.SIGKILL)
    return len(managers)


def replace_lost_taskmanagers(cluster: StandaloneCluster) -> None:
    """Start a TaskManager for each one of the cluster's that is gone, without waiting for
    Flink's script (on a loaded machine it can take a minute; it registers on its own; the
    cluster's `restarting_cluster` waits for the script before it stops the cluster)."""
    for _ in range(cluster.taskmanagers - len(cluster.taskmanager_pids())):
        script = subprocess.Popen(
            ["bash", str(flink_home() / "bin" / "taskmanager.sh"), "start"],
            env=cluster.environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _replacements.setdefault(id(cluster), []).append(script)


def seconds_until_forgotten(cluster: StandaloneCluster, registered: int) -> float:
    """Seconds until the JobManager has dropped a TaskManager just killed (fewer than
    `registered` TaskManagers in its view): how long the loss took to notice."""
    started = time.monotonic()
    while time.monotonic() - started < 120:
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError, KeyError):
            overview = rest_call(cluster.rest_address, "/overview", timeout_s=10)
            if overview["taskmanagers"] < registered:
                break
        time.sleep(0.1)
    return round(time.monotonic() - started, 1)


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


_ENDED = ("FINISHED", "CANCELED", "FAILED")


def cancel_unfinished_jobs(address: str) -> None:
    """Cancel every job of the cluster that has not ended (one a failed test left running)."""
    for job in rest_call(address, "/jobs", timeout_s=10)["jobs"]:
        if job["status"] not in _ENDED:
            cancel(address, job["id"])


def wait_until_idle(cluster: StandaloneCluster, timeout_s: float = 180) -> None:
    """Wait until no job runs and exactly the cluster's TaskManagers are registered, every
    slot free: a TaskManager killed by an earlier test is gone from the JobManager's view
    (a heartbeat timeout after the kill), so a new job's tasks are not sent to it."""
    deadline = time.monotonic() + timeout_s
    overview: dict[str, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            overview = rest_call(cluster.rest_address, "/overview", timeout_s=10)
            slots = cluster.taskmanagers * cluster.slots_per_taskmanager
            if (
                overview["jobs-running"] == 0
                and overview["taskmanagers"] == cluster.taskmanagers
                and overview["slots-total"] == overview["slots-available"] == slots
            ):
                return
        time.sleep(0.5)
    raise TimeoutError(f"the cluster is not idle after {timeout_s:.0f} s: {overview}")
