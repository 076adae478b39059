"""Kafka in the job spec: sinks to topics, the connector jar taken from the cache, and the
rules `validate` enforces (a jar to run with, transactions that outlive a checkpoint)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.connectors import connector_jars
from streamagents.connectors.connector_jars import ConnectorJar
from streamagents.jobs.cli.main import main
from streamagents.jobs.spec import SpecError, check_runnable, load_spec

ENV = {"GEMINI_API_KEY": "test-key", "KAFKA_SECRET": "kafka-secret-value-99"}

KAFKA_JOB = """\
name: kafka-tickets
source:
  kafka:
    topics: [tickets]
    bootstrap_servers: broker:9092
    group_id: tickets
key: customer.id
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: "${GEMINI_API_KEY}"}}
sinks:
  outputs:
    kafka:
      topic: answers
      bootstrap_servers: broker:9092
      properties: {sasl.jaas.config: "password=${KAFKA_SECRET}"}
  dead_letters: {path: out/dead}
checkpointing: {interval_s: 10}
"""


@pytest.fixture
def jar_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty jar cache; the installed Flink's Kafka jar would be cached here."""
    cache = tmp_path / "jar-cache"
    monkeypatch.setenv("STREAMAGENTS_JAR_CACHE", str(cache))
    return cache


def cache_a_jar(cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    jar = cache / connector_jars.connector_jar("kafka").filename
    jar.write_bytes(b"jar")
    return jar


def test_kafka_sink_defaults_to_exactly_once_with_a_15_minute_transaction_timeout(
    tmp_path: Path, jar_cache: Path
) -> None:
    spec = load_spec(write_spec(tmp_path, KAFKA_JOB), ENV).spec
    sink = spec.sinks.outputs.kafka
    assert sink is not None and spec.sinks.outputs.path is None
    assert sink.delivery == "exactly-once" and sink.transaction_timeout_s == 900
    assert sink.transactional_id_prefix is None and sink.connector_jar is None
    assert spec.source.kafka is not None and spec.source.kafka.connector_jar is None
    assert spec.sinks.outputs.describe() == "kafka topic answers"
    assert spec.sinks.dead_letters.describe() == str(tmp_path / "out" / "dead")


def test_a_kafka_source_starts_at_committed_offsets_falling_back_to_earliest(
    tmp_path: Path,
) -> None:
    source = load_spec(write_spec(tmp_path, KAFKA_JOB), ENV).spec.source.kafka
    assert source is not None
    assert (source.starting_offsets, source.offset_reset) == ("committed", "earliest")
    text = KAFKA_JOB.replace(
        "    group_id: tickets", "    group_id: tickets\n    offset_reset: none"
    )
    source = load_spec(write_spec(tmp_path, text), ENV).spec.source.kafka
    assert source is not None and source.offset_reset == "none"


def test_offset_reset_is_refused_beside_starting_offsets_that_ignore_the_group(
    tmp_path: Path,
) -> None:
    text = KAFKA_JOB.replace(
        "    group_id: tickets",
        "    group_id: tickets\n    starting_offsets: earliest\n    offset_reset: latest",
    )
    with pytest.raises(SpecError, match="offset_reset applies to starting_offsets: committed"):
        load_spec(write_spec(tmp_path, text), ENV)


def test_a_missing_connector_jar_names_the_command_to_run(tmp_path: Path, jar_cache: Path) -> None:
    loaded = load_spec(write_spec(tmp_path, KAFKA_JOB), ENV)
    with pytest.raises(SpecError) as caught:
        check_runnable(loaded)
    message = str(caught.value)
    assert ":3: source.kafka: no Kafka connector jar in the cache; run `streamagents jars " in (
        message
    )
    assert ":12: sinks.outputs.kafka: no Kafka connector jar" in message
    cache_a_jar(jar_cache)
    check_runnable(loaded)


def test_a_named_connector_jar_must_exist(tmp_path: Path, jar_cache: Path) -> None:
    text = KAFKA_JOB.replace(
        "    group_id: tickets", "    group_id: tickets\n    connector_jar: k.jar"
    )
    loaded = load_spec(write_spec(tmp_path, text), ENV)
    with pytest.raises(SpecError, match=r":7: source.kafka.connector_jar: no such file: .*k\.jar"):
        check_runnable(loaded)
    (tmp_path / "k.jar").write_bytes(b"jar")
    check_runnable(loaded)  # the source's jar serves the sink too; none is cached


def test_exactly_once_transactions_must_outlive_the_checkpoint_interval(
    tmp_path: Path, jar_cache: Path
) -> None:
    cache_a_jar(jar_cache)
    text = KAFKA_JOB.replace(
        "      topic: answers", "      topic: answers\n      transaction_timeout_s: 10"
    )
    with pytest.raises(SpecError) as caught:
        check_runnable(load_spec(write_spec(tmp_path, text), ENV))
    assert (
        ":14: sinks.outputs.kafka.transaction_timeout_s: the transaction timeout (10 s) must "
        "be longer than checkpointing.interval_s (10 s)" in str(caught.value)
    )
    at_least_once = text.replace(
        "      topic: answers", "      topic: answers\n      delivery: at-least-once"
    )
    check_runnable(load_spec(write_spec(tmp_path, at_least_once), ENV))


def test_a_sink_is_a_path_or_a_topic_not_both(tmp_path: Path) -> None:
    text = KAFKA_JOB.replace("  dead_letters: {path: out/dead}", "  dead_letters: {}")
    with pytest.raises(SpecError, match=r"sinks\.dead_letters: expected exactly one of 'path' or"):
        load_spec(write_spec(tmp_path, text), ENV)
    both = KAFKA_JOB.replace(
        "  dead_letters: {path: out/dead}",
        "  dead_letters: {path: out/dead, kafka: {topic: d, bootstrap_servers: b:1}}",
    )
    with pytest.raises(SpecError, match="got path, kafka"):
        load_spec(write_spec(tmp_path, both), ENV)


def test_unknown_delivery_suggests_the_nearest(tmp_path: Path) -> None:
    text = KAFKA_JOB.replace(
        "      topic: answers", "      topic: answers\n      delivery: exactly_once"
    )
    with pytest.raises(SpecError, match="did you mean 'exactly-once'"):
        load_spec(write_spec(tmp_path, text), ENV)


def test_sink_properties_from_the_environment_never_appear_in_the_spec_repr(
    tmp_path: Path,
) -> None:
    spec = load_spec(write_spec(tmp_path, KAFKA_JOB), ENV).spec
    sink = spec.sinks.outputs.kafka
    assert sink is not None and ENV["KAFKA_SECRET"] in sink.properties["sasl.jaas.config"]
    for shown in (repr(spec), str(spec), repr(sink)):
        assert ENV["KAFKA_SECRET"] not in shown


def test_validate_prints_the_topics_and_fails_without_a_jar(
    tmp_path: Path,
    jar_cache: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    path = write_spec(tmp_path, KAFKA_JOB)
    assert main(["validate", str(path)]) == 2
    assert "streamagents jars fetch kafka" in capsys.readouterr().err
    cache_a_jar(jar_cache)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "outputs    kafka topic answers" in out and "kafka ['tickets']" in out


def test_validate_explains_a_flink_version_without_known_jars(
    tmp_path: Path, jar_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connector_jars, "flink_version", lambda: "1.17.2")
    loaded = load_spec(write_spec(tmp_path, KAFKA_JOB), ENV)
    with pytest.raises(SpecError, match=r"no connector jars are known for Flink 1\.17\.2"):
        check_runnable(loaded)


def test_connector_table_digests_are_sha256_hex() -> None:
    for jars in connector_jars.CONNECTORS.values():
        for jar in jars.values():
            assert isinstance(jar, ConnectorJar)
            assert len(jar.sha256) == len(hashlib.sha256().hexdigest())
            int(jar.sha256, 16)


def test_the_event_log_goes_to_a_directory_or_a_topic(tmp_path: Path, jar_cache: Path) -> None:
    cache_a_jar(jar_cache)
    text = KAFKA_JOB + "event_log:\n  kafka: {topic: events, bootstrap_servers: broker:9092}\n"
    loaded = load_spec(write_spec(tmp_path, text), ENV)
    event_log = loaded.spec.event_log
    assert event_log is not None and event_log.path is None
    assert event_log.describe() == "kafka topic events" and event_log.level == "standard"
    check_runnable(loaded)
    both = text + "  path: out/events\n"
    with pytest.raises(SpecError, match="event_log: expected exactly one of 'path' or 'kafka'"):
        load_spec(write_spec(tmp_path, both), ENV)
    rolled = text + "  roll_bytes: 1000\n"
    with pytest.raises(SpecError, match="roll_bytes and roll_seconds apply to event-log files"):
        load_spec(write_spec(tmp_path, rolled), ENV)


def test_an_event_log_topic_needs_the_jar_too(tmp_path: Path, jar_cache: Path) -> None:
    text = """\
    name: files-in-events-out
    source: {files: {path: in}}
    key: customer.id
    agent:
      model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: "${GEMINI_API_KEY}"}}
    sinks:
      outputs: {path: out/answers}
      dead_letters: {path: out/dead}
    event_log:
      kafka: {topic: events, bootstrap_servers: broker:9092}
    """
    with pytest.raises(SpecError, match=r":10: event_log\.kafka: no Kafka connector jar in the"):
        check_runnable(load_spec(write_spec(tmp_path, text), ENV))
