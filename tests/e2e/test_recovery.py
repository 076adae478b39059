"""Recovery of the agent operator: kill a job mid-run or stop it with a savepoint, resume it.

The job (`operator_recovery_job.py`) runs in a subprocess against a loopback stub; its
FileSink commits outputs only when a checkpoint completes. Two sequences, each a module
fixture whose steps the tests below assert one behaviour at a time:

- `gemini_recovery` (the `gemini` wire): killed while a photo's model call is held (the
  checkpoint holds that run and the photo queued behind it), while a run is parked for an
  approval and after a follow-up was scheduled; restored from that checkpoint and stopped
  with a savepoint while runs are pending; the decision given and restored from the
  savepoint until every input has its one committed output (the runs pending at the
  checkpoint were performed again: model calls are at-least-once).
- `interactions_recovery` (the `gemini-interactions` wire, with a tool, the event log and
  live telemetry): two photo runs killed while their continued calls are held, restored
  until both are answered.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from doubles import GeminiScript, InteractionsPhotoScript
from e2e_tools import image_bytes, refunds_made
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from otlp_collector import attributes, received_spans

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.operators.telemetry.spans import span_id_for, spans_from_events, trace_id_for
from streamagents.serde.events import EventType

# the first test's setup runs three attempts of a job: over 600 s on a loaded machine
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

JOB = Path(__file__).parents[1] / "support" / "operator_recovery_job.py"
PHOTO = image_bytes(5, 20_000)
QUEUED_PHOTO = image_bytes(6, 300_000)
INPUTS = [
    {
        "id": "held-photo",
        "key": "photo",
        "text": "scenario:held look",
        "parts": [
            {"kind": "image", "mime_type": "image/png", "data": base64.b64encode(PHOTO).decode()}
        ],
    },
    {  # no id: its id is the sha256 of this line and its position (0), though it waits in
        # state with a ref
        "key": "photo",
        "text": "scenario:slow queued",
        "parts": [
            {
                "kind": "image",
                "mime_type": "image/png",
                "data": base64.b64encode(QUEUED_PHOTO).decode(),
            }
        ],
    },
    *({"id": f"r{i}", "key": f"k{i % 10}", "text": f"scenario:slow n{i}"} for i in range(60)),
    *({"key": "twins", "text": "scenario:slow twin"} for _ in range(4)),  # the same line 4 times
]
LINES = [json.dumps(r) for r in INPUTS]
ORDER = f"KR-{uuid.uuid4().hex[:8]}"
PARK = {"id": "park-1", "key": "p", "text": f"scenario:refund {ORDER}"}
FOLLOWUP_AFTER_S = 10.0
WATCH = {"id": "fu-1", "key": "f", "text": f"scenario:followup {FOLLOWUP_AFTER_S} plain kr"}
GEMINI_OUTPUTS = len(INPUTS) + 3
"""Outputs of the gemini sequence: one per input, the parked run's and the follow-up's."""
PHOTOS = [{"id": f"photo-{n}", "key": f"p{n}", "text": f"scenario:photo {n}"} for n in (1, 2)]
HEADER_SECRET = "Bearer collector-token-0123456789abcdef"


def expected_ids() -> Counter[str]:
    """Each input's id: given, or the sha256 of its line and its position among its key's."""
    positions: Counter[str] = Counter()
    ids: Counter[str] = Counter()
    for record, line in zip(INPUTS, LINES, strict=True):
        if "id" in record:
            ids[record["id"]] += 1
            continue
        ids[f"{hashlib.sha256(line.encode()).hexdigest()}-{positions[record['key']]}"] += 1
        positions[record["key"]] += 1
    return ids


INPUT_IDS = expected_ids()


def job_command(mode: str, folder: Path, stub: LoopbackStubServer, *extra: str) -> list[str]:
    """The command line running the recovery job in `mode` over `folder` (its inputs in
    `folder/inputs`, a folder the job watches)."""
    return [
        sys.executable,
        str(JOB),
        mode,
        "--stub",
        stub.url,
        "--inputs",
        str(folder / "inputs"),
        "--outputs",
        str(folder / "outputs"),
        "--checkpoints",
        str(folder / "checkpoints"),
        "--media",
        str(folder / "media"),
        *extra,
    ]


def write_inputs(folder: Path, name: str, records: list[dict[str, Any]]) -> None:
    """Put a JSONL file of `records` into the watched inputs folder whole (renamed into it)."""
    staged = folder / name
    staged.write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "inputs").mkdir(exist_ok=True)
    os.rename(staged, folder / "inputs" / name)


def committed_outputs(folder: Path) -> list[dict[str, Any]]:
    """Output records in committed part files (in-progress and pending files start with '.')."""
    return committed_lines(folder / "outputs")


def committed_lines(folder: Path) -> list[dict[str, Any]]:
    """Records in the committed part files under `folder`."""
    records = []
    for path in sorted(folder.rglob("part-*")):
        if not path.name.startswith("."):
            records += [json.loads(line) for line in path.read_text().splitlines() if line]
    return records


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest completed checkpoint (one with its _metadata written)."""
    done = [p.parent for p in (folder / "checkpoints").glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1])) if done else None


def checkpoint_number(folder: Path) -> int:
    """The number of the newest completed checkpoint, 0 when none."""
    latest = latest_checkpoint(folder)
    return int(latest.name.split("-")[1]) if latest is not None else 0


@contextmanager
def running(command: list[str]) -> Iterator[Callable[[Callable[[], object]], None]]:
    """Run a job subprocess; yields a function that waits until a condition holds (failing
    if the job ends first or it takes over 600 s: a loaded machine takes minutes to start a
    job); on exit the job is killed, JVM included."""
    job = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )

    def wait(done: Callable[[], object], timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert job.poll() is None, "the job ended before it was stopped"
            assert time.monotonic() < deadline, "the job did not get there in time"
            time.sleep(0.1)

    try:
        yield wait
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def committed_then_two_checkpoints(folder: Path, outputs: int) -> Callable[[], bool]:
    """Whether `outputs` outputs are committed and then two more checkpoints passed (so an
    output committed twice would show)."""
    state: dict[str, int] = {}

    def check() -> bool:
        if "at" not in state:
            if len(committed_outputs(folder)) >= outputs:
                state["at"] = checkpoint_number(folder)
            return False
        return checkpoint_number(folder) >= state["at"] + 2

    return check


def asked_then_checkpointed(
    folder: Path, stub: LoopbackStubServer, asked: Callable[[list[RecordedRequest]], bool]
) -> Callable[[], bool]:
    """Whether a checkpoint triggered after `asked(requests)` first held has completed (the
    calls asked are held, so that checkpoint holds their runs mid-way)."""
    state: dict[str, int] = {}

    def check() -> bool:
        if "asked_at" not in state:
            if asked(list(stub.requests)):
                state["asked_at"] = checkpoint_number(folder)
            return False
        return checkpoint_number(folder) >= state["asked_at"] + 2

    return check


def assert_state_holds_refs_not_bytes(checkpoint: Path, media: bytes) -> None:
    """The checkpoint names `media` by its digest (a run holds it) but holds none of its bytes."""
    blobs = [p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()]
    assert any(hashlib.sha256(media).hexdigest().encode() in blob for blob in blobs)
    markers = [
        media[1000:1100],
        base64.b64encode(media)[:400],
        base64.urlsafe_b64encode(media)[:400],
    ]
    assert not any(marker in blob for marker in markers for blob in blobs)


@dataclass
class GeminiRecovery:
    """What the gemini sequence saw at each step."""

    folder: Path
    stub_requests: list[RecordedRequest]
    kill_checkpoint: Path
    """A copy of the checkpoint the killed job was restored from."""
    at_kill: list[dict[str, Any]]
    requests_at_kill: list[dict[str, Any]]
    savepoint_stop: subprocess.CompletedProcess[str]
    at_savepoint: list[dict[str, Any]]
    refunds_before_decision: list[float]
    outputs: list[dict[str, Any]]
    requests: list[dict[str, Any]]


@pytest.fixture(scope="module")
def gemini_recovery(tmp_path_factory: pytest.TempPathFactory) -> GeminiRecovery:
    """Kill, restore and stop with a savepoint, restore again: one job, three attempts."""
    folder = tmp_path_factory.mktemp("gemini-recovery")
    write_inputs(folder, "inputs.jsonl", INPUTS)
    write_inputs(folder, "park.jsonl", [PARK])
    requests = folder / "approval-requests"
    options = (
        *("--approval-tool", "e2e_tools:refund_order", "--approval-requests", str(requests)),
        "--followups",
    )
    script = GeminiScript(held_s=900)  # held until the kill
    with LoopbackStubServer(script) as stub:
        with running(job_command("run", folder, stub, *options)) as wait:
            held = asked_then_checkpointed(
                folder, stub, lambda asked: any(b"scenario:held" in r.body for r in asked)
            )
            wait(lambda: held() and committed_lines(requests))  # the parked run's request
            # the follow-up is scheduled now, so that it is not yet due at the kill
            write_inputs(folder, "watch.jsonl", [WATCH])
            wait(lambda: "fu-1" in {o["id"] for o in committed_outputs(folder)})
        killed = time.monotonic()
        checkpoint = latest_checkpoint(folder)
        assert checkpoint is not None
        kill_checkpoint = Path(shutil.copytree(checkpoint, folder / "kill-checkpoint"))
        at_kill = committed_outputs(folder)
        requests_at_kill = committed_lines(requests)
        script.held_s = 0.0
        time.sleep(max(0.0, killed + FOLLOWUP_AFTER_S - time.monotonic()))  # due while down
        stopped = subprocess.run(
            job_command(
                "savepoint",
                folder,
                stub,
                *options,
                *("--restore", str(checkpoint), "--savepoints", (folder / "savepoints").as_uri()),
                *("--stop-after", str(len(at_kill) + 1)),
            ),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert stopped.returncode == 0, stopped.stderr[-3000:]
        at_savepoint = committed_outputs(folder)
        refunds_before_decision = refunds_made(ORDER)
        [request] = requests_at_kill
        decision = {"key": "p", "approval": {"call_id": request["call_id"], "decision": "approve"}}
        write_inputs(folder, "decisions.jsonl", [decision])
        savepoint = stopped.stdout.split("SAVEPOINT ", 1)[1].strip()
        restored = job_command("run", folder, stub, *options, "--restore", savepoint)
        with running(restored) as wait:
            wait(committed_then_two_checkpoints(folder, GEMINI_OUTPUTS))
        stub_requests = list(stub.requests)
    return GeminiRecovery(
        folder=folder,
        stub_requests=stub_requests,
        kill_checkpoint=kill_checkpoint,
        at_kill=at_kill,
        requests_at_kill=requests_at_kill,
        savepoint_stop=stopped,
        at_savepoint=at_savepoint,
        refunds_before_decision=refunds_before_decision,
        outputs=committed_outputs(folder),
        requests=committed_lines(requests),
    )


def test_killed_job_resumes_from_its_last_checkpoint_with_each_output_once(
    gemini_recovery: GeminiRecovery,
) -> None:
    run = gemini_recovery
    assert_state_holds_refs_not_bytes(run.kill_checkpoint, PHOTO)
    assert_state_holds_refs_not_bytes(run.kill_checkpoint, QUEUED_PHOTO)  # behind the held run
    assert "held-photo" not in {o["id"] for o in run.at_kill}
    assert len(run.at_kill) < len(INPUTS), "the job finished before it was killed"
    main = [o for o in run.outputs if o["id"] in INPUT_IDS]
    assert Counter(o["id"] for o in main) == INPUT_IDS
    assert all(o["status"] == "ok" for o in run.outputs)
    held_calls = [r for r in run.stub_requests if b"scenario:held" in r.body]
    assert len(held_calls) >= 2, "the call pending at the kill was not performed again"


def test_job_stopped_with_a_savepoint_resumes_with_each_output_once(
    gemini_recovery: GeminiRecovery,
) -> None:
    run = gemini_recovery
    assert "SAVEPOINT file:" in run.savepoint_stop.stdout
    assert len(run.at_kill) < len(run.at_savepoint) < GEMINI_OUTPUTS
    assert Counter(o["id"] for o in run.outputs) == INPUT_IDS + Counter(
        ["park-1", "fu-1", next(o["id"] for o in run.outputs if o["id"].startswith("followup-"))]
    )


def test_a_parked_run_survives_a_kill_and_completes_on_a_decision_after_the_restore(
    gemini_recovery: GeminiRecovery,
) -> None:
    run = gemini_recovery
    assert "park-1" not in {o["id"] for o in run.at_savepoint}
    assert run.refunds_before_decision == []
    [output] = [o for o in run.outputs if o["id"] == "park-1"]
    assert (output["status"], output["text"]) == ("ok", "refund handled")
    assert refunds_made(ORDER) == [30]  # made once, after the restore, on the decision
    assert run.requests == run.requests_at_kill  # the restored runs did not ask again


def test_a_followup_due_while_the_job_was_down_fires_after_the_restore(
    gemini_recovery: GeminiRecovery,
) -> None:
    run = gemini_recovery
    assert not any(o["id"].startswith("followup-") for o in run.at_kill)
    [fired] = [o for o in run.outputs if o["id"].startswith("followup-")]
    assert (fired["key"], fired["status"], fired["text"]) == ("f", "ok", "ok fired-kr")
    assert (
        fired["attributes"]["followup"]["due_ms"] - fired["attributes"]["followup"]["scheduled_ms"]
        == FOLLOWUP_AFTER_S * 1000
    )


@dataclass
class InteractionsRecovery:
    """What the interactions sequence saw: at the kill and after the restored run."""

    folder: Path
    at_kill: list[dict[str, Any]]
    spans_at_kill: list[Span]
    requests_after_restore: list[dict[str, Any]]
    spans: list[Span]
    collector_requests: list[RecordedRequest]


@pytest.fixture(scope="module")
def interactions_recovery(tmp_path_factory: pytest.TempPathFactory) -> InteractionsRecovery:
    """Two photo runs through a tool and a stored interaction, killed mid-way and restored,
    with the event log and live spans (content captured) on."""
    folder = tmp_path_factory.mktemp("interactions-recovery")
    write_inputs(folder, "photos.jsonl", PHOTOS)
    script = InteractionsPhotoScript(hold_s=900)  # held until the kill
    ok = StubReply(b"", headers={})
    log = folder / "events"
    with LoopbackStubServer(lambda _request: ok) as collector, LoopbackStubServer(script) as stub:
        options = (
            *("--provider", "gemini-interactions", "--tool", "e2e_tools:make_image"),
            *("--event-log", str(log), "--telemetry", collector.url),
            *("--telemetry-header", f"Authorization={HEADER_SECRET}"),
        )
        held = asked_then_checkpointed(
            folder,
            stub,
            lambda asked: sum(b"previous_interaction_id" in r.body for r in asked) >= len(PHOTOS),
        )

        def first_steps_sent() -> bool:  # each run's first model call and tool call
            if not held() or len(received_spans(collector, "operator-recovery")) < 4:
                return False
            # A kill loses the log's last unflushed second (docs/eventlog.md): kill only
            # once the events from before the checkpoint are flushed (both model calls'
            # requests and the tool's response of each run).
            events = read_events(log, typed=True, include_in_progress=True, damaged=[])
            kinds = [e.event_type for e in events]
            return kinds.count(EventType.CHAT_REQUEST) >= 2 * len(PHOTOS) and kinds.count(
                EventType.TOOL_RESPONSE
            ) >= len(PHOTOS)

        with running(job_command("run", folder, stub, *options)) as wait:
            wait(first_steps_sent)
        checkpoint = latest_checkpoint(folder)
        assert checkpoint is not None
        at_kill = committed_outputs(folder)
        spans_at_kill = received_spans(collector, "operator-recovery")
        asked_before = len(stub.requests)
        script.hold_s = 0

        def runs_answered_sent_and_logged() -> bool:  # the log's flusher writes every few s
            if len(committed_outputs(folder)) < len(PHOTOS):
                return False
            spans = received_spans(collector, "operator-recovery")
            if sum(not s.parent_span_id for s in spans) < len(PHOTOS):
                return False
            events = read_events(log, typed=True, include_in_progress=True, damaged=[])
            return sum(e.event_type is EventType.OUTPUT for e in events) == len(PHOTOS)

        with running(job_command("run", folder, stub, *options, "--restore", str(checkpoint))) as w:
            w(runs_answered_sent_and_logged)
        return InteractionsRecovery(
            folder=folder,
            at_kill=at_kill,
            spans_at_kill=spans_at_kill,
            requests_after_restore=[r.json for r in stub.requests[asked_before:]],
            spans=received_spans(collector, "operator-recovery"),
            collector_requests=list(collector.requests),
        )


def test_a_restored_run_continues_its_stored_interaction_with_the_tool_image(
    interactions_recovery: InteractionsRecovery,
) -> None:
    run = interactions_recovery
    assert run.at_kill == []
    outputs = committed_outputs(run.folder)
    assert sorted((o["id"], o["text"]) for o in outputs) == [
        ("photo-1", "saw picture 1"),
        ("photo-2", "saw picture 2"),
    ]
    # The restored runs asked the model once each, continuing the interaction in their state
    # with only the function_result (the picture) instead of the whole conversation.
    after = run.requests_after_restore
    assert sorted(b["previous_interaction_id"] for b in after) == ["int-1-1", "int-2-1"]
    assert all([s["type"] for s in b["input"]] == ["function_result"] for b in after)


def test_a_restored_run_continues_its_trace_with_the_ids_of_its_event_log(
    interactions_recovery: InteractionsRecovery,
) -> None:
    """Live spans from a job killed mid-run and restored: the restored runs' spans join the
    traces begun before the kill, and every id is the one the offline export of the event
    log gives; no span holds media bytes, the API key or the collector's header."""
    run = interactions_recovery
    spans = run.spans
    assert all(r.headers["authorization"] == HEADER_SECRET for r in run.collector_requests)
    assert sorted(s.name for s in run.spans_at_kill) == [
        "chat gemini-3-flash-preview",
        "chat gemini-3-flash-preview",
        "execute_tool make_image",
        "execute_tool make_image",
    ]
    assert len(spans) == len({s.span_id for s in spans}) == 8  # nothing sent twice
    roots = {attributes(s)["streamagents.key"]: s for s in spans if not s.parent_span_id}
    assert set(roots) == {"p1", "p2"}
    for key, root in roots.items():
        run_id = attributes(root)["streamagents.run_id"]
        assert root.trace_id == trace_id_for(run_id).to_bytes(16, "big")
        assert root.span_id == span_id_for(run_id).to_bytes(8, "big")
        assert root.name == "invoke_agent operator-recovery"
        assert attributes(root)["streamagents.status"] == "ok"
        assert attributes(root)["streamagents.input_id"] == f"photo-{key[1]}"
        children = [s for s in spans if s.trace_id == root.trace_id and s is not root]
        assert sorted(s.name for s in children) == [
            "chat gemini-3-flash-preview",
            "chat gemini-3-flash-preview",
            "execute_tool make_image",
        ]
        assert all(s.parent_span_id == root.span_id for s in children)
        assert all(root.start_time_unix_nano <= s.start_time_unix_nano for s in children)
        # The call performed again after the restore continues the stored interaction.
        last = max(children, key=lambda s: s.start_time_unix_nano)
        assert attributes(last)["gen_ai.response.id"] == f"int-{key[1]}-2"
        image = json.loads(attributes(last)["gen_ai.input.messages"])[-1]["parts"][-1]
        assert image["type"] == "uri" and image["mime_type"] == "image/png"
    events = read_events(run.folder / "events", typed=True, include_in_progress=True)
    offline = spans_from_events(events)
    assert {(s.trace_id, s.span_id, s.parent_span_id, s.name) for s in offline} == {
        (
            int.from_bytes(s.trace_id, "big"),
            int.from_bytes(s.span_id, "big"),
            int.from_bytes(s.parent_span_id, "big") or None,
            s.name,
        )
        for s in spans
    }
    raw = b"".join(s.SerializeToString() for s in spans)
    media = [f.read_bytes() for f in (run.folder / "media").rglob("*") if f.is_file()]
    assert any(image_bytes(1) == m for m in media)
    for data in media:
        assert data[:200] not in raw and base64.b64encode(data)[:200] not in raw
    assert b"test-key" not in raw and HEADER_SECRET.encode() not in raw
