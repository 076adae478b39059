"""Where an unset `sdk_process` starts a worker: the cores a process may use, a container's
CPU quota included (cgroup v2 and v1 files as a container sees them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamagents.connectors.providers._usable_cores import usable_cores
from streamagents.connectors.providers.sdk_process import wants_worker

AFFINITY = len(os.sched_getaffinity(0))


def v2(root: Path, text: str) -> Path:
    (root / "cpu.max").write_text(text)
    return root


def v1(root: Path, quota_us: str, period_us: str = "100000") -> Path:
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.cfs_quota_us").write_text(quota_us)
    (root / "cpu" / "cpu.cfs_period_us").write_text(period_us)
    return root


def test_without_a_quota_the_affinity_mask_counts(tmp_path: Path) -> None:
    assert usable_cores(tmp_path) == AFFINITY  # no cgroup files at all
    assert usable_cores(v2(tmp_path, "max 100000\n")) == AFFINITY


def test_a_v1_quota_of_minus_one_is_no_quota(tmp_path: Path) -> None:
    assert usable_cores(v1(tmp_path, "-1\n")) == AFFINITY


@pytest.mark.parametrize(
    ("quota", "cores"), [("50000 100000\n", 1), ("100000 100000\n", 1), ("150000 100000\n", 2)]
)
def test_a_v2_quota_caps_the_cores_rounded_up(tmp_path: Path, quota: str, cores: int) -> None:
    assert usable_cores(v2(tmp_path, quota)) == min(AFFINITY, cores)


def test_a_v1_quota_caps_the_cores_rounded_up(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    (tmp_path / "two-and-a-half").mkdir()
    assert usable_cores(v1(tmp_path / "half", "50000")) == 1
    assert usable_cores(v1(tmp_path / "two-and-a-half", "250000")) == min(AFFINITY, 3)


def test_a_damaged_quota_file_is_no_quota(tmp_path: Path) -> None:
    assert usable_cores(v2(tmp_path, "lots of cpu\n")) == AFFINITY


def test_unset_means_a_worker_with_two_cores_or_more_and_a_setting_wins() -> None:
    assert (wants_worker(None, cores=1), wants_worker(None, cores=2)) == (False, True)
    assert (wants_worker(True, cores=1), wants_worker(False, cores=8)) == (True, False)
    assert wants_worker(None) == (usable_cores() >= 2)
