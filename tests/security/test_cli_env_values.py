"""`--header` and `--kafka-property` take `${ENV}` references, so a secret need not be on a
command line; a reference to a variable that is not set is refused before anything runs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from sample_runs import write_sample_log

from streamagents.connectors.connector_jars import connector_jar
from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.jobs.cli.main import main
from streamagents.jobs.cli.replay import register
from streamagents.jobs.replay.topic import LogTopicError, log_topic


def _replay_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["replay", "--spec", "c.yaml", "--out", "o", *argv])


@pytest.fixture
def jar_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A jar cache holding the Kafka connector jar (an empty stand-in: no job is run)."""
    monkeypatch.setenv("STREAMAGENTS_JAR_CACHE", str(tmp_path / "jars"))
    jar = tmp_path / "jars" / connector_jar("kafka").filename
    jar.parent.mkdir()
    jar.write_bytes(b"")


@pytest.mark.usefixtures("jar_cache")
def test_kafka_property_values_expand_env_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", "s3cret-from-env")
    topic = log_topic(
        _replay_args(
            "--log-topic", "events", "--bootstrap-servers", "k1:9092",
            "--kafka-property", "sasl.jaas.config=x password=\"${KAFKA_PASSWORD}\";",
        )
    )  # fmt: skip
    assert topic is not None
    assert topic.properties == {"sasl.jaas.config": 'x password="s3cret-from-env";'}


@pytest.mark.usefixtures("jar_cache")
def test_a_kafka_property_naming_an_unset_variable_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    args = _replay_args(
        "--log-topic", "events", "--bootstrap-servers", "k1:9092",
        "--kafka-property", "sasl.password=${NOT_SET_ANYWHERE}",
    )  # fmt: skip
    with pytest.raises(LogTopicError, match="NOT_SET_ANYWHERE is not set"):
        log_topic(args)


def test_an_otlp_header_value_expands_env_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTLP_TOKEN", "tok-from-env-123")
    sample = write_sample_log(tmp_path / "sample")
    with LoopbackStubServer(lambda _request: StubReply(b"", headers={})) as stub:
        argv = ["eventlog", "export-otlp", str(sample.log_dir), "--endpoint", stub.url]
        assert main([*argv, "--header", "Authorization=Bearer ${OTLP_TOKEN}"]) == 0
        sent = {k.lower(): v for k, v in stub.requests[0].headers.items()}
    assert sent["authorization"] == "Bearer tok-from-env-123"
