"""How many cores this process may use: its CPU affinity, capped by a container's CPU quota.

`sdk_process` left unset runs the SDK in a worker only where the worker has a core of its
own beside the TaskManager's Python; a container limited to one CPU by its quota (a
Kubernetes `limits.cpu: 1`) still sees every core of its host in its affinity mask, so the
quota counts too. The quota is read where a container sees its own cgroup: cgroup v2's
`cpu.max` and cgroup v1's `cpu/cpu.cfs_quota_us` under `/sys/fs/cgroup`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["usable_cores"]

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _quota_cores(root: Path) -> float | None:
    """The CPU quota in cores (cgroup v2, else v1), or None when there is none or no file."""
    try:
        quota, _, period = (root / "cpu.max").read_text().partition(" ")
        if quota.strip() != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def usable_cores(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process may run on at once: its affinity mask's size, capped by the
    container's CPU quota rounded up (at least 1)."""
    cores = len(os.sched_getaffinity(0))
    quota = _quota_cores(cgroup_root)
    if quota is not None and quota > 0:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)
