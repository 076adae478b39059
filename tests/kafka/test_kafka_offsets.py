"""The Kafka source's starting offsets as the connector builds them (a JVM, no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyflink.util.java_utils import add_jars_to_context_class_loader

from streamagents.connectors.kafka import offsets_initializer


@pytest.mark.parametrize(
    ("starting", "reset", "expected"),
    [
        ("committed", "earliest", "earliest"),
        ("committed", "latest", "latest"),
        ("committed", "none", "none"),
        ("earliest", "earliest", "earliest"),
        ("latest", "earliest", "latest"),
    ],
)
def test_committed_offsets_fall_back_to_the_reset_strategy_on_a_new_group(
    kafka_connector_jar: Path, starting: str, reset: str, expected: str
) -> None:
    add_jars_to_context_class_loader([kafka_connector_jar.as_uri()])
    initializer = offsets_initializer(starting, reset)._j_initializer  # type: ignore[arg-type]
    assert str(initializer.getAutoOffsetResetStrategy()) == expected
