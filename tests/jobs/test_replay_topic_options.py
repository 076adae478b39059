"""`streamagents replay`'s event-log topic options: what they name, and what they refuse
before any job starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from streamagents.connectors.connector_jars import connector_jar
from streamagents.jobs.cli.main import main
from streamagents.jobs.cli.replay import register
from streamagents.jobs.replay.topic import LogTopicError, log_topic

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["replay", "--spec", "c.yaml", "--out", "o", *argv])


@pytest.fixture
def jar_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A jar cache holding the Kafka connector jar (an empty stand-in: no job is run)."""
    monkeypatch.setenv("STREAMAGENTS_JAR_CACHE", str(tmp_path / "jars"))
    jar = tmp_path / "jars" / connector_jar("kafka").filename
    jar.parent.mkdir()
    jar.write_bytes(b"")
    return jar


def _production_spec(tmp_path: Path, event_log: str) -> Path:
    spec = tmp_path / "production.yaml"
    text = EXAMPLE.read_text().replace("path: data/tickets", f"path: {EXAMPLE.parent}/data/tickets")
    old = "event_log:\n  path: out/support_tickets/events\n"
    assert old in text
    spec.write_text(text.replace(old, event_log))
    return spec


def test_flags_name_the_topic_its_servers_and_client_properties(jar_cache: Path) -> None:
    topic = log_topic(
        _args(
            "--log-topic", "events", "--bootstrap-servers", "k1:9092,k2:9092",
            "--kafka-property", "security.protocol=SASL_SSL",
            "--kafka-property", "sasl.jaas.config=a=b c",
        )
    )  # fmt: skip
    assert topic is not None
    assert (topic.topic, topic.bootstrap_servers) == ("events", "k1:9092,k2:9092")
    assert topic.properties == {"security.protocol": "SASL_SSL", "sasl.jaas.config": "a=b c"}
    assert topic.connector_jar == str(jar_cache) and topic.media_root is None


def test_a_production_spec_gives_the_connection_of_its_event_log_topic(
    tmp_path: Path, jar_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_SECRET", "s3cret")
    spec = _production_spec(
        tmp_path,
        "event_log:\n  kafka:\n    topic: prod-events\n    bootstrap_servers: k:9092\n"
        "    properties: {sasl.password: '${KAFKA_SECRET}'}\n",
    )
    topic = log_topic(_args("--log-spec", str(spec)))
    assert topic is not None
    assert (topic.topic, topic.bootstrap_servers) == ("prod-events", "k:9092")
    assert topic.properties == {"sasl.password": "s3cret"}
    assert topic.media_root == str(tmp_path / "out" / "support_tickets" / "media")
    named = log_topic(_args("--log-spec", str(spec), "--log-topic", "other"))
    assert named is not None and named.topic == "other"


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        ([], "name the recorded runs"),
        (["--log", "l", "--log-topic", "t"], "not both"),
        (["--bootstrap-servers", "k:9092"], "need --log-topic"),
        (["--log-topic", "t"], "needs --bootstrap-servers"),
        (["--log-topic", "t", "--bootstrap-servers", "k:1", "--kafka-property", "x"], "NAME=VALUE"),
        (["--log-spec", "SPEC", "--bootstrap-servers", "k:1"], "leave out --bootstrap-servers"),
        (["--log-spec", "SPEC"], "logs to files"),
        (["--log-spec", "MISSING"], "invalid job spec"),
    ],
)
def test_options_that_do_not_name_one_topic_are_refused(
    tmp_path: Path, jar_cache: Path, argv: list[str], rule: str
) -> None:
    files_spec = str(_production_spec(tmp_path, "event_log:\n  path: events\n"))
    argv = [{"SPEC": files_spec, "MISSING": str(tmp_path / "nope.yaml")}.get(a, a) for a in argv]
    with pytest.raises(LogTopicError, match=rule):
        log_topic(_args(*argv))


def test_without_the_connector_jar_the_topic_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMAGENTS_JAR_CACHE", str(tmp_path / "empty"))
    with pytest.raises(LogTopicError, match="streamagents jars fetch kafka"):
        log_topic(_args("--log-topic", "t", "--bootstrap-servers", "k:9092"))


def test_a_bad_topic_option_stops_the_replay_before_any_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    candidate = _production_spec(tmp_path, "event_log:\n  path: events\n")
    out = tmp_path / "replay"
    argv = ["replay", "--spec", str(candidate), "--out", str(out), "--log-topic", "t"]
    assert main(argv) == 2
    assert "--log-topic needs --bootstrap-servers" in capsys.readouterr().err
    assert not out.exists()
