"""Kafka test clients (confluent-kafka): write input topics, read topics to their end as a
`read_committed` consumer, and measure a consumer group's lag."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

__all__ = [
    "BinaryRecord",
    "TopicRecord",
    "committed_lag",
    "kafka_sinks",
    "kafka_source",
    "produce",
    "read_topic",
    "read_topic_bytes",
]

_LOG = logging.getLogger("kafka-test-client")


@dataclass(frozen=True)
class BinaryRecord:
    """One record read back, its value as bytes."""

    partition: int
    offset: int
    key: str | None
    value: bytes


@dataclass(frozen=True)
class TopicRecord:
    """One record read back: where it was, its key and its value as text."""

    partition: int
    offset: int
    key: str | None
    value: str

    def json(self) -> Any:
        """The value parsed as JSON."""
        return json.loads(self.value)


def produce(bootstrap_servers: str, topic: str, records: Iterable[tuple[str | None, str]]) -> int:
    """Write (key, value) records to `topic` with an idempotent producer; returns how many."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "message.max.bytes": 25 * 1024 * 1024,  # up to what the test broker takes
            "logger": _LOG,
        }
    )
    count = 0
    for key, value in records:
        producer.produce(topic, key=key, value=value.encode("utf-8", "surrogateescape"))
        producer.poll(0)
        count += 1
    if producer.flush(60) != 0:
        raise RuntimeError(f"records to {topic} still unsent after 60 s")
    return count


def _consumer(bootstrap_servers: str, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "logger": _LOG,
            **extra,
        }
    )


def _partitions(consumer: Consumer, topic: str) -> list[int]:
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    return sorted(metadata.partitions)


def read_topic(bootstrap_servers: str, topic: str, timeout_s: float = 60.0) -> list[TopicRecord]:
    """Every committed record of `topic`, from the start to the last stable offset of each
    partition, as a `read_committed` consumer sees it (aborted and open transactions'
    records are skipped); values as text."""
    return [
        TopicRecord(r.partition, r.offset, r.key, r.value.decode("utf-8"))
        for r in read_topic_bytes(bootstrap_servers, topic, timeout_s)
    ]


def read_topic_bytes(
    bootstrap_servers: str, topic: str, timeout_s: float = 60.0
) -> list[BinaryRecord]:
    """`read_topic`, values as bytes."""
    consumer = _consumer(
        bootstrap_servers,
        f"reader-{uuid.uuid4().hex}",
        **{"isolation.level": "read_committed", "enable.partition.eof": True},
    )
    try:
        partitions = _partitions(consumer, topic)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        pending, records = set(partitions), []
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                    continue
                raise RuntimeError(f"reading {topic}: {error}")
            key = message.key()
            records.append(
                BinaryRecord(
                    partition=message.partition(),
                    offset=message.offset(),
                    key=None if key is None else key.decode("utf-8"),
                    value=message.value(),
                )
            )
        if pending:
            raise RuntimeError(f"partitions {sorted(pending)} of {topic} not read to the end")
        return records
    finally:
        consumer.close()


def committed_lag(bootstrap_servers: str, group: str, topic: str) -> int:
    """Records of `topic` past the offsets `group` has committed, over all partitions (a
    partition with no committed offset counts whole)."""
    consumer = _consumer(bootstrap_servers, group)
    try:
        partitions = [TopicPartition(topic, p) for p in _partitions(consumer, topic)]
        lag = 0
        for committed in consumer.committed(partitions, timeout=10):
            low, high = consumer.get_watermark_offsets(committed, timeout=10)
            position = committed.offset if committed.offset >= 0 else low
            lag += max(0, high - position)
        return lag
    finally:
        consumer.close()


def kafka_sinks(servers: str, outputs: str, dead_letters: str) -> dict[str, Any]:
    """A spec's `sinks`: outputs and dead letters to topics, exactly once (the default),
    with a 2-minute transaction timeout on the outputs."""
    return {
        "outputs": {
            "kafka": {"topic": outputs, "bootstrap_servers": servers, "transaction_timeout_s": 120}
        },
        "dead_letters": {"kafka": {"topic": dead_letters, "bootstrap_servers": servers}},
    }


def kafka_source(servers: str, topic: str, group: str) -> dict[str, Any]:
    """A spec's `source`: one topic read from its earliest offset by consumer group `group`."""
    return {
        "kafka": {
            "topics": [topic],
            "bootstrap_servers": servers,
            "group_id": group,
            "starting_offsets": "earliest",
        }
    }
