"""Kafka tests share one real broker per session and the fetched connector jar; every test
here runs Java processes, so each is marked `e2e` (the fast subset skips them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_broker import KafkaBroker
from maven_artifacts import resolve

from streamagents.connectors.connector_jars import fetch_jar

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test of this folder `e2e`."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One KRaft broker on 127.0.0.1 for the session (jars resolved with Maven if missing)."""
    with KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), resolve("kafka-broker")) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_connector_jar() -> Path:
    """The Flink Kafka connector jar, fetched into the user cache as `streamagents jars fetch
    kafka` does (a no-op when it is there)."""
    return fetch_jar("kafka")
