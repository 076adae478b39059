"""The reliability suite: every test here runs real jobs, so it is both `reliability` and `e2e`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import cancel_unfinished_jobs, restarting_cluster, wait_until_idle

from streamagents.jobs.cluster import StandaloneCluster

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test of this folder `reliability` and `e2e` (the fast subset skips it)."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """JobManager + 2 TaskManagers that restart a failed job, started once for a module's
    tests (a start costs half a minute); always stopped, even on failure."""
    with restarting_cluster(tmp_path_factory.mktemp("cluster")) as handle:
        yield handle


@pytest.fixture()
def cluster(module_cluster: StandaloneCluster) -> Iterator[StandaloneCluster]:
    """The module's cluster, idle with 2 TaskManagers (a killed one replaced and forgotten)
    when the test starts; a job the test left running is cancelled when it ends."""
    wait_until_idle(module_cluster)
    yield module_cluster
    cancel_unfinished_jobs(module_cluster.rest_address)
