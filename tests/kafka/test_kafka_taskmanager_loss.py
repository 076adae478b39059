"""Losing a TaskManager while model calls are in flight: `kill -9` on a real cluster, Kafka in
and out.

A standalone cluster (JobManager + 2 TaskManagers on 127.0.0.1, 2 slots each, from the
wheel's scripts) runs a spec submitted with `streamagents submit`: a 3-partition input topic
read from the earliest offset, parallelism 2, a checkpoint every second, outputs and dead
letters written to topics exactly once, the event log to files. Each input is a tool loop
(the model asks for `lookup_order`, then answers) against a Gemini stub in this process
whose replies take 50-100 ms; every tenth input carries an inline image above the offload
threshold. Once the model has answered 40% of the inputs it holds further calls; one
TaskManager is then killed with SIGKILL and the calls released; Flink restarts the job from
its last checkpoint on the other TaskManager's free slot, aborting the transactions the dead
one left open. A `read_committed` consumer must then find exactly one output per input, each
key's outputs in input order, the source group's lag at 0, every media ref resolvable in the
store with no temporary files left there, a restart on record and few calls made twice;
then the job is cancelled. The figures are printed and go to a JSON file.

Each input names its tenant, and the spec gives every tenant a token budget over a window
longer than the test (`agent.budgets.per_tenant`, `on_exceeded: dead_letter`). The calls
of one tenant, `capped`, report 100,000 prompt tokens each, so it spends its budget within
its first few inputs; the other tenants' calls report a few tokens. Across the kill the
capped tenant's inputs end as `BudgetExceeded` error outputs and dead letters (all of them
once the kill is past: the restored attempts rebuild its spend from the copies its keys
keep), while every other tenant's input is answered.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backlog_scenario import submit
from clusters import cancel, checkpoint_counts, checkpoint_failures, kill_taskmanager, restarts
from doubles import calls_reply, text_reply
from e2e_tools import image_bytes
from kafka_broker import KafkaBroker
from kafka_tools import committed_lag, kafka_sinks, kafka_source, produce, read_topic

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.media import MediaStore
from streamagents.jobs.cli.progress import job_state
from streamagents.jobs.cluster.standalone import StandaloneCluster, rest_call
from streamagents.serde.messages import MediaRef

pytestmark = pytest.mark.reliability

INPUTS = 750
KEYS = 250
IMAGE_EVERY = 10  # every 10th input carries an image
IMAGE_BYTES = 12_000
OFFLOAD_THRESHOLD = 4_096
KILL_AT = 0.4  # the fraction of inputs the model has answered when it holds its calls
TIMEOUT_S = 420
CAPPED_KEYS = 25  # keys c000-c024 belong to the tenant `capped`, the rest to four others
CAPPED_PROMPT_TOKENS = 100_000
TENANT_TOKENS = 1_000_000  # per window; each of the 2 subtasks allows a tenant half of it
GROUP = "kafka-tm-loss"


def tenant_of(n: int) -> str:
    """The tenant input `n` names: `capped` for the first keys, else one of four."""
    key = n % KEYS
    return "capped" if key < CAPPED_KEYS else f"tenant-{key % 4}"


class ToolLoopModel:
    """Gemini stub responder: first call asks for `lookup_order`, the second answers.

    Replies take 50-100 ms so that calls are in flight when a TaskManager dies; every call is
    counted per input id, to show how many were made again after the kill. Once `hold_after`
    inputs are answered, later calls wait until `release` is set, so the test kills the
    TaskManager at that point however fast the job runs."""

    def __init__(self, hold_after: int) -> None:
        self.calls: Counter[str] = Counter()
        self.answered: set[str] = set()
        self.hold_after = hold_after
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._random = random.Random(11)

    def calls_made(self, ids: set[str] | None = None) -> int:
        """The calls received so far, for the inputs `ids` or for all."""
        with self._lock:
            return sum(n for i, n in self.calls.items() if ids is None or i in ids)

    @property
    def holding(self) -> bool:
        """Whether calls now wait for `release`."""
        with self._lock:
            return len(self.answered) >= self.hold_after and not self.release.is_set()

    def __call__(self, request: RecordedRequest) -> StubReply:
        body = request.json
        # A TaskManager killed mid-request leaves a request without a (whole) JSON body.
        contents = body.get("contents", []) if isinstance(body, dict) else []
        marked = [
            (i, text)
            for i, content in enumerate(contents)
            for text in (str(part.get("text", "")) for part in content.get("parts", []))
            if text.startswith("input ")
        ]
        if not marked:
            return StubReply({"error": {"code": 400, "message": "no input"}}, status=400)
        start, text = marked[-1]
        input_id = text.split()[1]
        step = sum(1 for c in contents[start + 1 :] if c.get("role") == "model")
        with self._lock:
            self.calls[input_id] += 1
            delay = self._random.uniform(0.05, 0.1)
            hold = len(self.answered) >= self.hold_after
        if hold:
            self.release.wait(timeout=TIMEOUT_S)
        time.sleep(delay)
        if step == 0:
            reply = calls_reply(("lookup_order", {"order_id": "O-5521"}))
        else:
            reply = text_reply(f"answered {input_id}")
            with self._lock:
                self.answered.add(input_id)
        if tenant_of(int(input_id[3:])) == "capped":
            reply["usageMetadata"]["promptTokenCount"] = CAPPED_PROMPT_TOKENS
        return StubReply(reply)


def input_records() -> Iterator[tuple[str, str]]:
    """(key, line) of each input, keyed by customer, `seq` rising per key."""
    for n in range(INPUTS):
        customer = f"c{n % KEYS:03d}"
        record: dict[str, Any] = {
            "id": f"in-{n:05d}",
            "customer": {"id": customer},
            "tenant": tenant_of(n),
            "seq": n,
            "text": f"input in-{n:05d} where is my order?",
        }
        if n % IMAGE_EVERY == 0:
            photo = image_bytes(1000 + n // IMAGE_EVERY % 40, IMAGE_BYTES)
            record["parts"] = [
                {
                    "kind": "image",
                    "mime_type": "image/png",
                    "data": base64.b64encode(photo).decode(),
                }
            ]
        yield customer, json.dumps(record)


def write_spec(folder: Path, broker: KafkaBroker, stub_url: str, topics: dict[str, str]) -> Path:
    servers = broker.bootstrap_servers
    spec = {
        "name": "kafka-taskmanager-loss",
        "source": kafka_source(servers, topics["inputs"], GROUP),
        "key": "customer.id",
        "agent": {
            "model": {
                "provider": "gemini",
                "model": "gemini-2.5-flash",
                "options": {"api_key": "stub-key", "base_url": stub_url},
            },
            "system_prompt": "Answer the customer about their order.",
            "tools": ["streamagents.jobs.examples.support_tools:lookup_order"],
            "memory": {"max_messages": 6},
            "budgets": {
                "max_model_calls": 4,
                "max_tool_calls": 4,
                "run_timeout_s": 300,
                "per_tenant": {"field": "tenant", "tokens": TENANT_TOKENS, "window_s": 3600},
            },
            "max_in_flight": 64,
            "offload_threshold_bytes": OFFLOAD_THRESHOLD,
        },
        "media_store": str(folder / "media"),
        "event_log": {"path": str(folder / "events"), "level": "standard"},
        "sinks": kafka_sinks(servers, topics["outputs"], topics["dead"]),
        "parallelism": 2,
        "checkpointing": {"interval_s": 1, "dir": str(folder / "checkpoints")},
    }
    path = folder / "kafka_taskmanager_loss.yaml"  # JSON is YAML
    path.write_text(json.dumps(spec, indent=2))
    return path


def refs_in(value: Any) -> Iterator[MediaRef]:
    """Every media ref in a JSON-like value (JSON text inside strings included)."""
    if isinstance(value, dict):
        if isinstance(value.get("sha256"), str) and "mime_type" in value:
            # A ref, or a part in the event log's flat form (kind, mime_type, sha256, ...).
            fields = ("sha256", "mime_type", "size_bytes", "uri")
            yield MediaRef.model_validate({k: value[k] for k in fields if value.get(k) is not None})
        else:
            for item in value.values():
                yield from refs_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs_in(item)
    elif isinstance(value, str) and value[:1] in "[{" and "sha256" in value:
        with contextlib.suppress(ValueError):
            yield from refs_in(json.loads(value))


def test_killing_a_taskmanager_loses_and_duplicates_no_kafka_output(
    kafka_broker: KafkaBroker,
    kafka_connector_jar: Path,
    cluster: StandaloneCluster,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    capped = {f"in-{n:05d}" for n in range(INPUTS) if tenant_of(n) == "capped"}
    others = {f"in-{n:05d}" for n in range(INPUTS)} - capped
    topics = {"inputs": "tm-inputs", "outputs": "tm-answers", "dead": "tm-dead-letters"}
    for topic in topics.values():
        kafka_broker.create_topic(topic, 3)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topics["inputs"], input_records())
    model = ToolLoopModel(hold_after=int(KILL_AT * INPUTS))
    address = cluster.rest_address
    kill: dict[str, Any] = {}
    with LoopbackStubServer(model) as stub:
        job_id = submit(write_spec(tmp_path, kafka_broker, stub.url, topics), address)
        deadline = time.monotonic() + TIMEOUT_S
        restart_count = 0  # sampled while the job runs: a cancelled job's metrics can be gone
        while True:
            assert time.monotonic() < deadline, f"not all answers committed in {TIMEOUT_S} s"
            state = job_state(address, job_id)
            assert state not in ("FAILED", "CANCELED", "FINISHED"), f"job ended {state}"
            committed = len({r.json()["id"] for r in read_topic(servers, topics["outputs"])})
            if not kill and model.holding:
                kill_taskmanager(cluster)
                kill = {
                    "at_s": round(time.monotonic() - started, 1),
                    "inputs_answered_by_model": len(model.answered),
                    "model_calls_so_far": model.calls_made(),
                    "other_tenants_model_calls_so_far": model.calls_made(others),
                    "committed": committed,
                    "checkpoints": checkpoint_counts(address, job_id),
                    "checkpoint_failures": checkpoint_failures(address, job_id),
                }
                model.release.set()
            elif kill and "commits_resumed_after_s" not in kill and committed > kill["committed"]:
                resumed_s = time.monotonic() - started - kill["at_s"]
                kill["commits_resumed_after_s"] = round(resumed_s, 1)
            restart_count = max(restart_count, restarts(address, job_id))
            if kill and committed >= INPUTS:
                break
            time.sleep(0.5)
        lag_deadline = time.monotonic() + 60
        while committed_lag(servers, GROUP, topics["inputs"]) and time.monotonic() < lag_deadline:
            time.sleep(0.5)
        lag = committed_lag(servers, GROUP, topics["inputs"])
        restart_count = max(restart_count, restarts(address, job_id))
        exceptions = rest_call(address, f"/jobs/{job_id}/exceptions", timeout_s=10)
        checkpoints = checkpoint_counts(address, job_id)
        cancel(address, job_id)

    outputs = read_topic(servers, topics["outputs"])
    records = [r.json() for r in outputs]
    per_id = Counter(record["id"] for record in records)
    expected = {f"in-{n:05d}" for n in range(INPUTS)}
    lost = sorted(expected - set(per_id))
    duplicated = sorted(i for i, count in per_id.items() if count > 1)
    by_key: dict[str | None, list[int]] = defaultdict(list)
    for record in sorted(outputs, key=lambda r: (r.partition, r.offset)):
        by_key[record.key].append(record.json()["attributes"]["seq"])
    out_of_order = sorted(str(k) for k, seqs in by_key.items() if seqs != sorted(seqs))
    dead_letters = [r.json() for r in read_topic(servers, topics["dead"])]
    store = MediaStore(str(tmp_path / "media"))
    output_refs = [ref for record in records for ref in refs_in(record)]
    events = list(read_events(tmp_path / "events"))
    event_refs = [ref for event in events for ref in refs_in(event)]
    for ref in {r.sha256: r for r in output_refs + event_refs}.values():
        store.get(ref)  # raises unless the object is there and its digest matches
    temporary = [p for p in (tmp_path / "media").rglob("*") if p.name.startswith(".tmp")]
    by_id = {record["id"]: record for record in records}
    refused = {i for i in capped if i in by_id and by_id[i]["status"] == "error"}
    late = {i for i in capped if int(i[3:]) >= 0.8 * INPUTS}
    calls = model.calls_made()
    other_calls = model.calls_made(others)
    figures = {
        "inputs": INPUTS,
        "keys": KEYS,
        "partitions": 3,
        "image_inputs": len(range(0, INPUTS, IMAGE_EVERY)),
        "parallelism": 2,
        "checkpoint_interval_s": 1,
        "model_latency_ms": "50-100",
        "max_in_flight": 64,
        "kill": kill,
        "restarts": restart_count,
        "checkpoints": checkpoints,
        "exception_history_entries": len(exceptions.get("exceptionHistory", {}).get("entries", [])),
        "committed_outputs": len(outputs),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "keys_out_of_order": len(out_of_order),
        "consumer_group_lag": lag,
        "dead_letters": len(dead_letters),
        "capped_tenant_inputs": len(capped),
        "capped_tenant_answered": len(capped - refused),
        "capped_tenant_refused": len(refused),
        "capped_tenant_model_calls": calls - other_calls,
        "model_calls": calls,
        "other_tenants_model_calls": other_calls,
        "other_tenants_model_calls_without_failures": 2 * len(others),
        "other_tenants_model_calls_reissued": other_calls - 2 * len(others),
        "inputs_with_reissued_calls": sum(1 for c in model.calls.values() if c > 2),
        "media_refs_checked": len({r.sha256 for r in output_refs + event_refs}),
        "media_refs_in_outputs": len(output_refs),
        "media_refs_in_event_log": len(event_refs),
        "media_temp_files": len(temporary),
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    report = tmp_path / "taskmanager_loss_figures.json"
    report.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    print(f"figures written to {report}")

    assert kill, "the TaskManager was never killed"
    assert kill["inputs_answered_by_model"] < INPUTS, kill
    assert lost == [] and duplicated == [], f"lost {lost[:10]}, duplicated {duplicated[:10]}"
    assert out_of_order == [], out_of_order[:10]
    assert set(by_key) == {f"c{k:03d}" for k in range(KEYS)}
    assert lag == 0
    # Every other tenant goes on; the capped tenant gets its documented outcome, also after
    # the kill: an error output naming its budget and a BudgetExceeded dead letter.
    assert all(by_id[i]["status"] == "ok" for i in others)
    assert all(by_id[i]["error"]["budget"] == "per_tenant.tokens" for i in refused)
    assert sorted(letter["id"] for letter in dead_letters) == sorted(refused)
    assert all(letter["error_type"] == "BudgetExceeded" for letter in dead_letters)
    assert late <= refused, sorted(late - refused)[:10]
    # A call starts only under the budget, and the calls in flight when it is reached finish.
    assert len(capped - refused) <= 2 * CAPPED_KEYS, figures
    assert event_refs, "the image inputs left no media ref in the event log"
    assert temporary == []
    # The JobManager's own record (Flink's `numRestarts` metric, printed as `restarts`, can
    # stand still for up to `web.timeout` after a TaskManager is lost: 0 in a run that did
    # restore): the job failed once and was restored from a checkpoint.
    assert figures["exception_history_entries"] >= 1, figures
    assert checkpoints.get("restored", 0) >= 1, f"the kill did not restore the job: {figures}"
    # Checkpoints complete while calls are out, so a kill redoes the calls since the restored
    # checkpoint and those held in flight (up to 2 x max_in_flight), not every call made
    # before it (before unaligned checkpoints: 3,765 of 4,000). How many depends on how late
    # that checkpoint was: 416 of 1,350 in a CI run beside a second test worker. The bound by
    # checkpoint time is asserted by tests/reliability/test_backlog_checkpoints.py (alone).
    made_before_kill = kill["other_tenants_model_calls_so_far"]
    assert other_calls - 2 * len(others) <= 0.75 * made_before_kill, figures
