"""`streamagents replay` reading the recorded runs from the event-log topic of a real broker.

The example job (demo model, tools, an image) runs with its event log on a 2-partition
topic (`verbose`, 64 KiB messages), over its tickets and one whose text is over the
message limit, so its events are offloaded whole to the media store. Two messages that
are not event-log messages are then written to the topic. The production spec replayed
over its own topic (`--log-spec`) reproduces the recording: zero differences, the long
ticket replayed whole, the two messages reported as damaged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_jobs import CLI, demo_env
from confluent_kafka import Producer
from kafka_broker import KafkaBroker

from streamagents.connectors.files import read_jsonl
from streamagents.jobs.examples.demo_responder import DEMO_PREFIX

EXAMPLES = Path(__file__).resolve().parents[2] / "jobs" / "examples"
TOPIC = "replay-events"
LONG_TEXT = "My order O-5521 is late, here is the whole story. " + "z" * 70_000


def _production_spec(folder: Path, servers: str) -> Path:
    """A copy of the example whose event log is the topic, with the long ticket added."""
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("out", "__pycache__"))
    long_ticket = {"id": "T-LONG", "customer": {"id": "C-99"}, "text": LONG_TEXT}
    (folder / "data" / "tickets" / "long.jsonl").write_text(json.dumps(long_ticket) + "\n")
    path = folder / "support_tickets.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["event_log"] = {
        "kafka": {"topic": TOPIC, "bootstrap_servers": servers},
        "level": "verbose",
        "max_record_bytes": 65536,
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv], env=demo_env(), capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def topic_replay(
    kafka_broker: KafkaBroker, kafka_connector_jar: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The production run, the two foreign messages, and the replay of the topic."""
    workdir = tmp_path_factory.mktemp("replay-topic")
    kafka_broker.create_topic(TOPIC, 2)
    spec = _production_spec(workdir / "job", kafka_broker.bootstrap_servers)
    run = _cli("run", str(spec))
    assert run.returncode == 0, run.stderr[-3000:]
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(TOPIC, key="C-17", value=b"garbage, not an event")
    producer.produce(TOPIC, key="C-17", value=b"\xc3\x01" + b"\xff" * 8 + b"\x02")
    assert producer.flush(30) == 0
    out = workdir / "replay"
    started = time.monotonic()
    replay = _cli(
        "replay", "--log-spec", str(spec), "--spec", str(spec), "--out", str(out),
        "--fail-if", "changed_answers>0", "--fail-if", "tool_path_diverged>0",
        "--fail-if", "new_errors>0", "--fail-if", "missing>0",
    )  # fmt: skip
    return {
        "replay": replay,
        "wall_s": time.monotonic() - started,
        "out": out,
        "answers": {r["id"]: r for r in read_jsonl(spec.parent / "out/support_tickets/answers")},
    }


def test_the_topic_replayed_reproduces_the_recording_with_zero_differences(
    topic_replay: dict[str, Any],
) -> None:
    replay, out = topic_replay["replay"], topic_replay["out"]
    assert replay.returncode == 0, replay.stderr[-3000:]  # the gates passed
    recorded = topic_replay["answers"]
    assert f"{len(recorded)} to replay, 0 not replayable" in replay.stdout
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert (summary["inputs"], summary["compared"], summary["differing"]) == (
        len(recorded),
        len(recorded),
        0,
    )
    replayed = {r["id"]: r for r in read_jsonl(out / "outputs")}
    assert sorted(replayed) == sorted(recorded)
    assert all(replayed[i]["text"] == recorded[i]["text"] for i in recorded)
    assert any(answer["text"].startswith(DEMO_PREFIX) for answer in replayed.values())


def test_the_offloaded_event_is_read_whole_from_the_media_store(
    topic_replay: dict[str, Any],
) -> None:
    out = topic_replay["out"]
    manifest = json.loads((out / "replay.json").read_text())
    assert manifest["log"]["topic"] == TOPIC and manifest["log"]["offloaded_events"] >= 1
    lines = [json.loads(x) for x in (out / "inputs" / "recorded.jsonl").read_text().splitlines()]
    [long_line] = [line for line in lines if line["id"] == "T-LONG"]
    assert long_line["text"] == LONG_TEXT


def test_messages_that_are_not_events_are_reported_as_damaged(
    topic_replay: dict[str, Any],
) -> None:
    replay, out = topic_replay["replay"], topic_replay["out"]
    assert "2 damaged message(s); every other message was read" in replay.stderr
    assert "no C3 01 marker" in replay.stderr
    assert "not one of the shipped event-log versions" in replay.stderr
    damaged = json.loads((out / "replay.json").read_text())["log"]["damaged_messages"]
    assert len(damaged) == 2
    print(f"topic replay wall time: {topic_replay['wall_s']:.1f} s")
