"""Rerun to continue, on Kafka: `kill -9` of `streamagents run` half-way through a topic,
then the same command again continues from the job's latest retained checkpoint (offsets,
keyed state, the sinks' transactions) and says so: a `read_committed` consumer finds every
input answered once, none twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cli_jobs import savepoint, start_run, wait_for
from kafka_broker import KafkaBroker
from kafka_tools import committed_lag, kafka_sinks, kafka_source, produce, read_topic
from rerun_jobs import INPUTS, kill_run, paced_spec, questions


def test_a_killed_kafka_run_continues_when_run_again_and_answers_each_input_once(
    kafka_broker: KafkaBroker, kafka_connector_jar: Path, tmp_path: Path
) -> None:
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("rerun-inputs", 3)
    kafka_broker.create_topic("rerun-answers", 3)
    kafka_broker.create_topic("rerun-dead", 1)
    produce(servers, "rerun-inputs", questions())
    spec = paced_spec(
        tmp_path / "job",
        "rerun-kafka",
        kafka_source(servers, "rerun-inputs", "rerun-kafka"),
        kafka_sinks(servers, "rerun-answers", "rerun-dead"),
    )

    def answered() -> Counter[str]:
        return Counter(record.json()["id"] for record in read_topic(servers, "rerun-answers"))

    process, first_job, _ = start_run(spec, tmp_path / "first.log")
    try:
        wait_for(lambda: sum(answered().values()) >= INPUTS // 5, 240)
    finally:
        kill_run(process)
    assert sum(answered().values()) < INPUTS, "the first run was to be killed half-way"

    process, second_job, address = start_run(spec, tmp_path / "second.log")
    try:
        log = (tmp_path / "second.log").read_text()
        assert f"of the previous run (job {first_job};" in log, log[:3000]
        wait_for(lambda: len(answered()) == INPUTS, 240)
        wait_for(lambda: committed_lag(servers, "rerun-kafka", "rerun-inputs") == 0, 60)
        savepoint(second_job, address, tmp_path / "savepoints")
        process.wait(timeout=120)
    finally:
        process.kill()
    ids = answered()
    assert sorted(ids) == [f"in-{n:03d}" for n in range(INPUTS)]
    assert set(ids.values()) == {1}
    assert read_topic(servers, "rerun-dead") == []
