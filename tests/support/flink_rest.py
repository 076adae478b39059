"""Figures of a running job read from Flink's REST API, for tests that watch a job."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from typing_extensions import Self

from streamagents.jobs.cluster.standalone import rest_call


def agent_metrics(address: str, job_id: str, vertex: str) -> dict[str, float]:
    """The agent operator's `streamagents` metrics summed over the subtasks of the job's
    vertex whose name contains `vertex`; empty before the metrics are registered."""
    vertices = rest_call(address, f"/jobs/{job_id}")["vertices"]
    vid = next(v["id"] for v in vertices if vertex in v["name"])
    path = f"/jobs/{job_id}/vertices/{vid}/subtasks/metrics"
    names = [m["id"] for m in rest_call(address, path) if ".streamagents." in m["id"]]
    if not names:
        return {}
    values = rest_call(address, f"{path}?get={','.join(names)}&agg=sum")
    return {m["id"].split(".streamagents.", 1)[1]: float(m["sum"]) for m in values}


class JobSampler:
    """Samples the running job of a mini-cluster's REST API on a thread, every `every_s`,
    while a `with` block runs; a subclass says what to read in `sample(job_id)`. Transient
    REST failures (the job not up yet, a metric not registered) are skipped."""

    def __init__(self, port: int, every_s: float) -> None:
        self.address = f"127.0.0.1:{port}"
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def get(self, path: str) -> Any:
        """One REST call to the job's cluster."""
        return rest_call(self.address, path)

    def sample(self, job_id: str) -> None:
        """Read what the subclass needs from the running job `job_id`."""
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            with contextlib.suppress(OSError, KeyError, ValueError, IndexError, StopIteration):
                self.sample(next(j["jid"] for j in self.get("/jobs/overview")["jobs"]))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
