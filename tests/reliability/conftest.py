"""The reliability suite: every test here runs real jobs, so it is both `reliability` and `e2e`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import restarting_cluster

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
    with restarting_cluster(tmp_path / "cluster") as handle:
        yield handle
