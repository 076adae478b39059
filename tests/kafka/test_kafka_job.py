"""A job from Kafka to Kafka on the local mini-cluster: killed, run again, stopped with a
savepoint and resumed.

A real broker (session fixture) holds a 3-partition input topic. A producer writes inputs
keyed by customer (some with an inline PNG, some malformed: not JSON, or without the key;
among them a 2 MB line that is not JSON and a 20 MB line that is not UTF-8). `streamagents
run` reads them with the default starting offsets (the new consumer group's committed
offsets, of which it has none: so from the earliest), answers through the demo model (the
loopback stub's scripted Gemini double, each reply after a short pause) and writes outputs,
dead letters and the event log (Avro single-object messages, `verbose`) to topics exactly
once. When a fifth of the first batch is answered, the `run` process is killed (`kill -9`);
the same command run again continues from the dead run's latest checkpoint and says so. When
every answer of the first batch is committed, the job is stopped with a savepoint; a second
batch is written, ending with an input whose answer is 1.3 MB, and the job resumes from the
savepoint. A `read_committed` consumer then finds exactly one output per input id, one dead
letter per malformed record, no record over the sinks' 1,000,000-byte limit (the large dead
letters, the long answer and its events keep prefixes and media-store refs that read back
the exact bytes), each key's outputs in input order in one partition, the source's consumer
group with no lag, and each run's events once, readable under every schema version.
"""

from __future__ import annotations

import base64
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_jobs import savepoint, start_run, wait_for
from e2e_tools import image_bytes
from kafka_broker import KafkaBroker
from kafka_tools import (
    TopicRecord,
    committed_lag,
    kafka_sinks,
    kafka_source,
    produce,
    read_topic,
    read_topic_bytes,
)
from long_answer_responder import LONG_ANSWER_MARKER, long_answer
from rerun_jobs import kill_run

from streamagents.connectors.media import MediaStore
from streamagents.connectors.record_offload import DEFAULT_MAX_RECORD_BYTES, PREFIX_CHARS
from streamagents.jobs.eventlog_topic import OFFLOADED_EVENT
from streamagents.serde import avro_single_object
from streamagents.serde.avro import SCHEMA_VERSIONS
from streamagents.serde.messages import MediaRef

KEYS = 12
FIRST, SECOND = 160, 80  # good inputs in the first and second batch
IMAGE_EVERY = 8
MALFORMED_EVERY = 20  # after every 20th good input, one malformed record
PARTITIONS = 3
LONG_ID = "in-long"  # the last input: its answer is over a Kafka record's 1 MiB
BAD_2MB = '{"id": "bad-2mb", "customer": {"id": "c-01"}, "text": "' + "é" * 1_000_000
"""2 MB of UTF-8 that is not JSON (it never ends)."""
BAD_20MB = '{"id": "bad-20mb", "customer": {"id": "c-02"}, "text": "' + "y" * 20_000_000 + "\udcff"
"""20 MB that is not UTF-8: the test producer writes the escaped byte 0xff as it is."""
ANSWER_IDS = [f"in-{n:04d}" for n in range(FIRST + SECOND)] + [LONG_ID]


def batch(start: int, count: int) -> tuple[list[tuple[str | None, str]], set[str]]:
    """Inputs `start`..`start+count-1` (keyed by customer, each key's `seq` rising) with a
    malformed record after every MALFORMED_EVERY-th; returns the records and the malformed
    records' markers."""
    records: list[tuple[str | None, str]] = []
    malformed = set()
    for n in range(start, start + count):
        customer = f"c-{n % KEYS:02d}"
        record: dict[str, Any] = {
            "id": f"in-{n:04d}",
            "customer": {"id": customer},
            "seq": n,
            "text": f"Question {n} from {customer}.",
        }
        if n % IMAGE_EVERY == 0:
            data = base64.b64encode(image_bytes(n, 3_000)).decode("ascii")
            record["parts"] = [{"kind": "image", "mime_type": "image/png", "data": data}]
        records.append((customer, json.dumps(record)))
        if n % MALFORMED_EVERY == MALFORMED_EVERY - 1:
            marker = f"bad-{n:04d}"
            malformed.add(marker)
            if n % (2 * MALFORMED_EVERY) == MALFORMED_EVERY - 1:
                records.append((customer, f'{{"id": "{marker}", "customer": {{"id": "{customer}"'))
            else:
                records.append((None, json.dumps({"id": marker, "text": "no customer"})))
    return records, malformed


def write_spec(directory: Path, broker: KafkaBroker, topics: dict[str, str]) -> Path:
    """The job spec: Kafka in (default starting offsets), demo model (2 calls in flight per
    subtask, each reply after a pause), Kafka out (exactly once, default record limits), 1 s
    checkpoints kept in the job's folder."""
    servers = broker.bootstrap_servers
    source = kafka_source(servers, topics["inputs"], "kafka-e2e")
    del source["kafka"]["starting_offsets"]
    spec = {
        "name": "kafka-e2e",
        "source": source,
        "key": "customer.id",
        "agent": {
            "model": {
                "provider": "demo",
                "model": "kafka-demo",
                "responder": "long_answer_responder:respond",
            },
            "system_prompt": "Answer the customer's question.",
            "max_in_flight": 2,
        },
        "media_store": "media",
        "event_log": {
            "kafka": {"topic": topics["events"], "bootstrap_servers": servers},
            "level": "verbose",
        },
        "sinks": kafka_sinks(servers, topics["outputs"], topics["dead"]),
        "parallelism": 2,
        "checkpointing": {"interval_s": 1},
    }
    path = directory / "kafka-job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def committed_ids(records: list[TopicRecord]) -> Counter[str]:
    return Counter(record.json()["id"] for record in records)


@pytest.fixture(scope="module")
def kafka_run(
    kafka_broker: KafkaBroker, kafka_connector_jar: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Run the job over two batches: the first run killed a fifth of the way into the first
    batch and run again, then a savepoint between the batches; returns what the topics hold."""
    workdir = tmp_path_factory.mktemp("kafka-job")
    topics = {
        "inputs": "e2e-inputs",
        "outputs": "e2e-answers",
        "dead": "e2e-dead-letters",
        "events": "e2e-events",
    }
    for topic in topics.values():
        kafka_broker.create_topic(topic, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    spec = write_spec(workdir, kafka_broker, topics)
    first, malformed = batch(0, FIRST)
    first[FIRST // 2 : FIRST // 2] = [("c-01", BAD_2MB), ("c-02", BAD_20MB)]
    produce(servers, topics["inputs"], first)

    def answered(count: int) -> bool:
        return len(committed_ids(read_topic(servers, topics["outputs"]))) >= count

    process, killed_job, _ = start_run(spec, workdir / "killed.log")
    try:
        wait_for(lambda: answered(FIRST // 5), 240)
    finally:
        kill_run(process)
    answered_when_killed = len(committed_ids(read_topic(servers, topics["outputs"])))

    process, job_id, address = start_run(spec, workdir / "first.log")
    try:
        continued = (workdir / "first.log").read_text()
        wait_for(lambda: answered(FIRST), 240)
        location = savepoint(job_id, address, workdir / "savepoints")
        assert process.wait(timeout=120) == 0, (workdir / "first.log").read_text()[-3000:]
    finally:
        process.kill()
    after_first = committed_ids(read_topic(servers, topics["outputs"]))

    second, more_malformed = batch(FIRST, SECOND)
    long_input = {"id": LONG_ID, "customer": {"id": "c-00"}, "seq": FIRST + SECOND}
    second.append(("c-00", json.dumps(long_input | {"text": LONG_ANSWER_MARKER})))
    produce(servers, topics["inputs"], second)
    process, job_id, address = start_run(spec, workdir / "second.log", "--from-savepoint", location)
    try:
        wait_for(lambda: answered(FIRST + SECOND + 1), 240)
        wait_for(lambda: committed_lag(servers, "kafka-e2e", topics["inputs"]) == 0, 60)
        savepoint(job_id, address, workdir / "savepoints")
        process.wait(timeout=120)
    finally:
        process.kill()
    return {
        "outputs": read_topic(servers, topics["outputs"]),
        "dead": read_topic(servers, topics["dead"]),
        "events": read_topic_bytes(servers, topics["events"]),
        "store": MediaStore(str(workdir / "media")),
        "after_first": after_first,
        "answered_when_killed": answered_when_killed,
        "killed_job": killed_job,
        "continued": continued,
        "malformed": malformed | more_malformed | {"bad-2mb", "bad-20mb"},
        "lag": committed_lag(servers, "kafka-e2e", topics["inputs"]),
        "inputs": len(first) + len(second),
    }


def test_every_input_is_answered_exactly_once_across_the_savepoint(
    kafka_run: dict[str, Any],
) -> None:
    ids = committed_ids(kafka_run["outputs"])
    assert sorted(ids) == ANSWER_IDS
    assert set(ids.values()) == {1}, [i for i, c in ids.items() if c > 1]
    assert sorted(kafka_run["after_first"]) == [f"in-{n:04d}" for n in range(FIRST)]
    assert all(r.json()["status"] == "ok" for r in kafka_run["outputs"])


def test_a_killed_run_continues_from_its_checkpoint_when_run_again(
    kafka_run: dict[str, Any],
) -> None:
    """Rerun to continue on Kafka: the killed run had answered part of the first batch; the
    same command continued its job (offsets, keyed state, the sinks' transactions) and said
    so, and every input is answered once (the test above), none twice."""
    assert 0 < kafka_run["answered_when_killed"] < FIRST
    assert f"of the previous run (job {kafka_run['killed_job']};" in kafka_run["continued"]


def test_inline_images_reach_the_model(kafka_run: dict[str, Any]) -> None:
    by_id = {r.json()["id"]: r.json() for r in kafka_run["outputs"]}
    for n in range(0, FIRST + SECOND, IMAGE_EVERY):
        assert "image/png" in by_id[f"in-{n:04d}"]["text"], by_id[f"in-{n:04d}"]["text"]
    assert "image/png" not in by_id["in-0001"]["text"]


def test_one_dead_letter_per_malformed_record_with_its_reason(kafka_run: dict[str, Any]) -> None:
    letters = [r.json() for r in kafka_run["dead"]]
    markers = Counter(
        next(m for m in kafka_run["malformed"] if m in letter["input"]) for letter in letters
    )
    assert set(markers) == kafka_run["malformed"] and set(markers.values()) == {1}
    assert {letter["error_type"] for letter in letters} == {
        "InvalidJson",
        "MissingKey",
        "InvalidText",
    }


def test_no_record_on_any_topic_exceeds_the_sinks_limit(kafka_run: dict[str, Any]) -> None:
    for topic in ("outputs", "dead"):
        sizes = [len(r.value.encode()) for r in kafka_run[topic]]
        assert max(sizes) <= DEFAULT_MAX_RECORD_BYTES, topic
    assert max(len(m.value) for m in kafka_run["events"]) <= DEFAULT_MAX_RECORD_BYTES


def test_a_2mb_bad_line_keeps_a_prefix_and_its_ref_reads_back_the_exact_line(
    kafka_run: dict[str, Any],
) -> None:
    (letter,) = [r.json() for r in kafka_run["dead"] if '"bad-2mb"' in r.json()["input"]]
    assert letter["error_type"] == "InvalidJson" and letter["key"] is None
    assert letter["input"] == BAD_2MB[:PREFIX_CHARS]
    ref = MediaRef.model_validate(letter["offloaded"]["input"])
    assert ref.size_bytes == len(BAD_2MB.encode()) > 2_000_000
    assert kafka_run["store"].get(ref) == BAD_2MB.encode()


def test_a_20mb_line_that_is_not_utf8_reads_back_byte_for_byte(kafka_run: dict[str, Any]) -> None:
    (letter,) = [r.json() for r in kafka_run["dead"] if '"bad-20mb"' in r.json()["input"]]
    assert letter["error_type"] == "InvalidText" and "not valid UTF-8" in letter["reason"]
    assert letter["input"] == BAD_20MB[:PREFIX_CHARS]
    ref = MediaRef.model_validate(letter["offloaded"]["input"])
    assert ref.mime_type == "application/octet-stream"
    assert kafka_run["store"].get(ref) == BAD_20MB.encode("utf-8", "surrogateescape")


def test_an_answer_over_1_mib_keeps_a_prefix_and_its_ref_reads_back_the_whole_text(
    kafka_run: dict[str, Any],
) -> None:
    (output,) = [r.json() for r in kafka_run["outputs"] if r.json()["id"] == LONG_ID]
    assert output["status"] == "ok" and output["key"] == "c-00"
    assert output["text"] == long_answer()[:PREFIX_CHARS]
    ref = MediaRef.model_validate(output["offloaded"]["text"])
    assert kafka_run["store"].get(ref) == long_answer().encode()


def test_events_of_the_long_answer_are_stored_whole_and_referenced(
    kafka_run: dict[str, Any],
) -> None:
    records = [avro_single_object.decode(m.value) for m in kafka_run["events"]]
    bounded = [r for r in records if OFFLOADED_EVENT in r["payload"]["attributes"]]
    stored = [
        json.loads(kafka_run["store"].get(MediaRef.model_validate_json(ref)))
        for ref in (r["payload"]["attributes"][OFFLOADED_EVENT] for r in bounded)
    ]
    assert [e["event_id"] for e in stored] == [r["event_id"] for r in bounded]
    answers = [e for e in stored if e["event_type"] == "chat_response"]
    assert [e["payload"]["messages"][0]["content"] for e in answers] == [long_answer()]


def test_outputs_are_keyed_by_customer_and_each_key_keeps_input_order(
    kafka_run: dict[str, Any],
) -> None:
    by_key: dict[str, list[TopicRecord]] = defaultdict(list)
    for record in sorted(kafka_run["outputs"], key=lambda r: (r.partition, r.offset)):
        assert record.key == record.json()["key"]
        by_key[record.key].append(record)
    assert len(by_key) == KEYS
    for key, records in by_key.items():
        assert len({r.partition for r in records}) == 1, key
        seqs = [r.json()["attributes"]["seq"] for r in records]
        assert seqs == sorted(seqs), (key, seqs)


def test_the_source_group_has_committed_every_input(kafka_run: dict[str, Any]) -> None:
    assert kafka_run["lag"] == 0


def test_the_event_log_topic_holds_each_run_once_readable_under_every_version(
    kafka_run: dict[str, Any],
) -> None:
    messages = kafka_run["events"]
    assert messages and all(m.value[:2] == avro_single_object.MARKER for m in messages)
    for version in SCHEMA_VERSIONS:
        records = [avro_single_object.decode(m.value, version) for m in messages]
        assert len({r["event_id"] for r in records}) == len(records)
        assert all(m.key == r["key"] for m, r in zip(messages, records, strict=True))
        outputs = Counter(
            r["payload"]["attributes"]["input_id"] for r in records if r["event_type"] == "output"
        )
        assert sorted(outputs) == ANSWER_IDS
        assert set(outputs.values()) == {1}
    runs: dict[str, list[int]] = defaultdict(list)
    for message in sorted(messages, key=lambda m: (m.partition, m.offset)):
        record = avro_single_object.decode(message.value)
        runs[record["run_id"]].append(record["sequence"])
    assert all(sequences == sorted(sequences) for sequences in runs.values())
