"""Fixtures shared by the whole suite; test doubles and helpers live in `tests/support/`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import (
    cancel_unfinished_jobs,
    replace_lost_taskmanagers,
    restarting_cluster,
    wait_until_idle,
)

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.jobs.cluster.standalone import StandaloneCluster

_TESTS = Path(__file__).parent
_KAFKA = _TESTS / "kafka"
_RELIABILITY = _TESTS / "reliability"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the Kafka folder `e2e` and the reliability folder `reliability` and `e2e`, before
    `-m` selects on the marks."""
    for item in items:
        if _KAFKA in item.path.parents:
            item.add_marker(pytest.mark.e2e)
        if _RELIABILITY in item.path.parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def stub() -> Iterator[LoopbackStubServer]:
    """A loopback stub server on 127.0.0.1, stopped after the test."""
    with LoopbackStubServer() as server:
        yield server


@pytest.fixture(scope="session")
def shared_restarting_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[StandaloneCluster]:
    """JobManager + 2 TaskManagers that restart a failed job, started once for every test
    that kills TaskManagers (Kafka and reliability; a start costs half a minute, more on a
    loaded machine); always stopped, even on failure."""
    with restarting_cluster(tmp_path_factory.mktemp("cluster")) as handle:
        yield handle


@pytest.fixture()
def cluster(shared_restarting_cluster: StandaloneCluster) -> Iterator[StandaloneCluster]:
    """The shared restarting cluster, idle with 2 TaskManagers (a killed one replaced and
    forgotten) when the test starts; when it ends, a job the test left running is cancelled
    and a TaskManager it killed is replaced."""
    wait_until_idle(shared_restarting_cluster)
    yield shared_restarting_cluster
    cancel_unfinished_jobs(shared_restarting_cluster.rest_address)
    replace_lost_taskmanagers(shared_restarting_cluster)
