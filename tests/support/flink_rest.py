"""Figures of a running job read from Flink's REST API, for tests that watch a job."""

from __future__ import annotations

from streamagents.jobs.cluster import rest_call


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
