"""The reliability suite: every test here runs real jobs, so it is both `reliability` and `e2e`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamagents.jobs.cluster import StandaloneCluster

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test of this folder `reliability` and `e2e` (the fast subset skips it)."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.e2e)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    """JobManager + 2 TaskManagers that restart a failed job; always stopped, even on failure."""
    conf = {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 20,
        "restart-strategy.fixed-delay.delay": "2 s",
        # Notice a killed TaskManager in seconds, not after the default 50 s.
        "heartbeat.interval": 2000,
        "heartbeat.timeout": 20000,
    }
    handle = StandaloneCluster(tmp_path / "cluster", taskmanagers=2, conf=conf)
    try:
        yield handle.start(timeout_s=180)
    finally:
        handle.stop()
    assert handle.pids() == [], "cluster processes outlived the test"
