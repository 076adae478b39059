"""Kafka to Kafka on a standalone cluster while a TaskManager is killed (`kill -9`) mid-run.

JobManager + 2 TaskManagers on 127.0.0.1 run a spec submitted with `streamagents submit`:
a 3-partition input topic read from the earliest offset, parallelism 2, a checkpoint
every second, outputs written to a topic exactly once. A Gemini stub in this process
answers each input after 20-60 ms. Once it has been asked about 40% of the inputs it holds
further calls; one TaskManager is then killed with SIGKILL and the calls released; Flink
restarts the job from its last checkpoint, aborting the transactions the dead TaskManager
left open. A `read_committed` consumer must then find
exactly one output per input and each key's outputs in input order, with the source
group's lag at 0. The figures are printed.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from cli_jobs import CLI, demo_env
from clusters import (
    cancel,
    checkpoint_counts,
    kill_taskmanager,
    restarts,
)
from doubles import text_reply
from kafka_broker import KafkaBroker
from kafka_tools import committed_lag, kafka_sinks, kafka_source, produce, read_topic

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.jobs._progress import job_state
from streamagents.jobs.cluster import StandaloneCluster

pytestmark = pytest.mark.reliability

INPUTS = 300
KEYS = 20
KILL_AT = 0.4
TIMEOUT_S = 420


class SlowModel:
    """Gemini stub responder: answers `answered <id>` after 20-60 ms, counting calls per id.

    Once `hold_after` inputs have been asked about, later calls wait until `release` is
    set, so the test kills the TaskManager at that point however fast the job runs."""

    def __init__(self, hold_after: int) -> None:
        self.calls: Counter[str] = Counter()
        self.hold_after = hold_after
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._random = random.Random(5)

    def __call__(self, request: RecordedRequest) -> StubReply:
        body = request.json
        found = re.findall(r"input (in-\d+)", json.dumps(body)) if isinstance(body, dict) else []
        if not found:  # a request cut short by the kill
            return StubReply({"error": {"code": 400, "message": "no input"}}, status=400)
        with self._lock:
            self.calls[found[-1]] += 1
            hold = len(self.calls) > self.hold_after
            delay = self._random.uniform(0.02, 0.06)
        if hold:
            self.release.wait(timeout=TIMEOUT_S)
        time.sleep(delay)
        return StubReply(text_reply(f"answered {found[-1]}"))


def write_spec(folder: Path, broker: KafkaBroker, stub_url: str, topics: dict[str, str]) -> Path:
    servers = broker.bootstrap_servers
    spec = {
        "name": "kafka-taskmanager-loss",
        "source": kafka_source(servers, topics["inputs"], "kafka-tm-loss"),
        "key": "customer.id",
        "agent": {
            "model": {
                "provider": "gemini",
                "model": "gemini-2.5-flash",
                "options": {"api_key": "stub-key", "base_url": stub_url},
            },
            "system_prompt": "Answer the customer.",
            "max_in_flight": 32,
        },
        "media_store": str(folder / "media"),
        "sinks": kafka_sinks(servers, topics["outputs"], topics["dead"]),
        "parallelism": 2,
        "checkpointing": {"interval_s": 1, "dir": str(folder / "checkpoints")},
    }
    path = folder / "kafka_taskmanager_loss.yaml"  # JSON is YAML
    path.write_text(json.dumps(spec, indent=2))
    return path


def test_killing_a_taskmanager_loses_and_duplicates_no_kafka_output(
    kafka_broker: KafkaBroker,
    kafka_connector_jar: Path,
    cluster: StandaloneCluster,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    topics = {"inputs": "tm-inputs", "outputs": "tm-answers", "dead": "tm-dead-letters"}
    for topic in topics.values():
        kafka_broker.create_topic(topic, 3)
    servers = kafka_broker.bootstrap_servers
    produce(
        servers,
        topics["inputs"],
        (
            (
                f"c{n % KEYS:02d}",
                json.dumps(
                    {
                        "id": f"in-{n:04d}",
                        "customer": {"id": f"c{n % KEYS:02d}"},
                        "seq": n,
                        "text": f"input in-{n:04d}: where is my order?",
                    }
                ),
            )
            for n in range(INPUTS)
        ),
    )
    model = SlowModel(hold_after=int(KILL_AT * INPUTS))
    kill: dict[str, object] = {}
    with LoopbackStubServer(model) as stub:
        address = cluster.rest_address
        spec = write_spec(tmp_path, kafka_broker, stub.url, topics)
        submitted = subprocess.run(
            [*CLI, "submit", str(spec), "--jobmanager", address],
            env=demo_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert submitted.returncode == 0, submitted.stdout[-2000:] + submitted.stderr[-3000:]
        found = re.search(r"^([0-9a-f]{32})$", submitted.stdout, re.MULTILINE)
        assert found, submitted.stdout
        job_id = found.group(1)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert time.monotonic() < deadline, f"not all answers committed in {TIMEOUT_S} s"
            state = job_state(address, job_id)
            assert state not in ("FAILED", "CANCELED"), f"job ended {state}"
            if not kill and len(model.calls) > model.hold_after:
                committed = len(read_topic(servers, topics["outputs"]))
                kill_taskmanager(cluster)
                kill = {
                    "at_s": round(time.monotonic() - started, 1),
                    "inputs_asked_of_model": len(model.calls),
                    "committed_outputs": committed,
                    "checkpoints": checkpoint_counts(address, job_id),
                }
                model.release.set()
            outputs = read_topic(servers, topics["outputs"])
            if kill and len({r.json()["id"] for r in outputs}) >= INPUTS:
                break
            time.sleep(1.0)
        lag_deadline = time.monotonic() + 60
        while committed_lag(servers, "kafka-tm-loss", topics["inputs"]) and (
            time.monotonic() < lag_deadline
        ):
            time.sleep(0.5)
        lag = committed_lag(servers, "kafka-tm-loss", topics["inputs"])
        restart_count = restarts(address, job_id)
        checkpoints = checkpoint_counts(address, job_id)
        cancel(address, job_id)

    outputs = read_topic(servers, topics["outputs"])
    per_id = Counter(r.json()["id"] for r in outputs)
    expected = {f"in-{n:04d}" for n in range(INPUTS)}
    lost = sorted(expected - set(per_id))
    duplicated = sorted(i for i, count in per_id.items() if count > 1)
    by_key: dict[str | None, list[int]] = defaultdict(list)
    for record in sorted(outputs, key=lambda r: (r.partition, r.offset)):
        by_key[record.key].append(record.json()["attributes"]["seq"])
    out_of_order = sorted(str(k) for k, seqs in by_key.items() if seqs != sorted(seqs))
    calls = sum(model.calls.values())
    figures = {
        "inputs": INPUTS,
        "keys": KEYS,
        "partitions": 3,
        "parallelism": 2,
        "checkpoint_interval_s": 1,
        "kill": kill,
        "restarts": restart_count,
        "checkpoints": checkpoints,
        "committed_outputs": len(outputs),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "keys_out_of_order": len(out_of_order),
        "model_calls": calls,
        "model_calls_reissued": calls - INPUTS,
        "consumer_group_lag": lag,
        "dead_letters": len(read_topic(servers, topics["dead"])),
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(figures, indent=2))
    assert kill, "the TaskManager was never killed"
    assert int(str(kill["inputs_asked_of_model"])) < INPUTS
    assert lost == [] and duplicated == [], f"lost {lost[:10]}, duplicated {duplicated[:10]}"
    assert out_of_order == []
    assert set(by_key) == {f"c{k:02d}" for k in range(KEYS)}
    assert all(r.json()["status"] == "ok" for r in outputs)
    assert figures["dead_letters"] == 0
    assert lag == 0
    assert restart_count >= 1, f"the kill did not restart the job: {restart_count}"
