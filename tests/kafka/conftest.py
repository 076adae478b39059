"""Kafka tests share one real broker per session and the fetched connector jar; every test
here runs Java processes, so tests/conftest.py marks each `e2e` (the fast subset skips them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_broker import KafkaBroker
from maven_artifacts import resolve

from streamagents.connectors.connector_jars import fetch_jar


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
