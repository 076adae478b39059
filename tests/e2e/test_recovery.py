"""Recovery of the agent operator: kill a job mid-run or stop it with a savepoint, resume it.

(Two tests near the end kill a job whose run is parked for an approval and approve it
after the restore, and one whose follow-up comes due while the job is down.)

The job (`operator_recovery_job.py`) runs in a subprocess against the loopback Gemini stub,
whose replies take 1 s, so runs are pending whenever a checkpoint is taken. After the
resume every input has exactly one committed output: the runs pending at the checkpoint
were performed again (their model calls are at-least-once) and the FileSink committed
each output once.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from doubles import GeminiScript, InteractionsPhotoScript
from e2e_tools import image_bytes, refunds_made
from otlp_collector import attributes, received_spans

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.operators.telemetry.spans import span_id_for, spans_from_events, trace_id_for
from streamagents.serde.events import EventType

pytestmark = pytest.mark.e2e

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
    """The command line running the recovery job in `mode` over `folder`."""
    return [
        sys.executable,
        str(JOB),
        mode,
        "--stub",
        stub.url,
        "--inputs",
        str(folder / "inputs.jsonl"),
        "--outputs",
        str(folder / "outputs"),
        "--checkpoints",
        str(folder / "checkpoints"),
        "--media",
        str(folder / "media"),
        *extra,
    ]


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


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A folder holding the job's inputs file."""
    (tmp_path / "inputs.jsonl").write_text("".join(line + "\n" for line in LINES))
    return tmp_path


def run_until(command: list[str], done: Callable[[], bool], timeout_s: float = 180) -> None:
    """Run a job subprocess until `done()` holds, then kill it (its JVM included)."""
    job = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert job.poll() is None, "the job ended before it was stopped"
            assert time.monotonic() < deadline, "the job did not get there in time"
            time.sleep(0.1)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def all_outputs_committed(folder: Path) -> Callable[[], bool]:
    """Whether every input has a committed output (then two more checkpoints passed)."""
    state: dict[str, Any] = {}

    def check() -> bool:
        if "at" not in state:
            if len(committed_outputs(folder)) >= len(INPUTS):
                state["at"] = checkpoint_number(folder)
            return False
        return checkpoint_number(folder) >= state["at"] + 2

    return check


def checkpoint_number(folder: Path) -> int:
    """The number of the newest completed checkpoint, 0 when none."""
    latest = latest_checkpoint(folder)
    return int(latest.name.split("-")[1]) if latest is not None else 0


def held_run_checkpointed(folder: Path, stub: LoopbackStubServer) -> Callable[[], bool]:
    """Whether a checkpoint triggered after the held photo's model call began has completed.

    The call is held for 8 s, so that checkpoint holds the photo's run in progress."""
    state: dict[str, int] = {}

    def check() -> bool:
        if "asked_at" not in state:
            if any(b"scenario:held" in request.body for request in list(stub.requests)):
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


def test_killed_job_resumes_from_its_last_checkpoint_with_each_output_once(
    workdir: Path,
) -> None:
    script = GeminiScript()
    with LoopbackStubServer(script) as stub:
        run_until(job_command("run", workdir, stub), held_run_checkpointed(workdir, stub))
        checkpoint = latest_checkpoint(workdir)
        assert checkpoint is not None
        assert_state_holds_refs_not_bytes(checkpoint, PHOTO)
        assert_state_holds_refs_not_bytes(checkpoint, QUEUED_PHOTO)  # queued behind the held run
        before = len(committed_outputs(workdir))
        assert before < len(INPUTS), "the job finished before it was killed"
        run_until(
            job_command("run", workdir, stub, "--restore", str(checkpoint)),
            all_outputs_committed(workdir),
        )
    outputs = committed_outputs(workdir)
    assert Counter(o["id"] for o in outputs) == INPUT_IDS
    assert all(o["status"] == "ok" for o in outputs)
    assert len(script.turns) > len(INPUTS), "no pending call was performed again"


def test_job_stopped_with_a_savepoint_resumes_with_each_output_once(workdir: Path) -> None:
    script = GeminiScript()
    with LoopbackStubServer(script) as stub:
        stopped = subprocess.run(
            job_command(
                "savepoint",
                workdir,
                stub,
                "--savepoints",
                (workdir / "savepoints").as_uri(),
                "--stop-after",
                "10",
            ),
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert stopped.returncode == 0, stopped.stderr[-3000:]
        savepoint = stopped.stdout.split("SAVEPOINT ", 1)[1].strip()
        before = len(committed_outputs(workdir))
        assert 0 < before < len(INPUTS)
        run_until(
            job_command("run", workdir, stub, "--restore", savepoint),
            all_outputs_committed(workdir),
        )
    outputs = committed_outputs(workdir)
    assert Counter(o["id"] for o in outputs) == INPUT_IDS


def continuations_checkpointed(
    folder: Path, stub: LoopbackStubServer, runs: int
) -> Callable[[], bool]:
    """Whether a checkpoint triggered after every run's continued model call began has
    completed (the calls are held, so that checkpoint holds each run mid-way)."""
    state: dict[str, int] = {}

    def check() -> bool:
        if "asked_at" not in state:
            continued = [r for r in list(stub.requests) if b"previous_interaction_id" in r.body]
            if len(continued) >= runs:
                state["asked_at"] = checkpoint_number(folder)
            return False
        return checkpoint_number(folder) >= state["asked_at"] + 2

    return check


def test_a_restored_run_continues_its_stored_interaction_with_the_tool_image(
    tmp_path: Path,
) -> None:
    photos = [{"id": f"photo-{n}", "key": f"p{n}", "text": f"scenario:photo {n}"} for n in (1, 2)]
    (tmp_path / "inputs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in photos))
    script = InteractionsPhotoScript(hold_s=60)
    interactions = ("--provider", "gemini-interactions", "--tool", "e2e_tools:make_image")
    with LoopbackStubServer(script) as stub:
        run_until(
            job_command("run", tmp_path, stub, *interactions),
            continuations_checkpointed(tmp_path, stub, len(photos)),
        )
        checkpoint = latest_checkpoint(tmp_path)
        assert checkpoint is not None and committed_outputs(tmp_path) == []
        before = len(stub.requests)
        script.hold_s = 0
        run_until(
            job_command("run", tmp_path, stub, *interactions, "--restore", str(checkpoint)),
            lambda: len(committed_outputs(tmp_path)) == len(photos),
        )
        after = [r.json for r in stub.requests[before:]]
    outputs = committed_outputs(tmp_path)
    assert sorted((o["id"], o["text"]) for o in outputs) == [
        ("photo-1", "saw picture 1"),
        ("photo-2", "saw picture 2"),
    ]
    # The restored runs asked the model once each, continuing the interaction in their state
    # with only the function_result (the picture) instead of the whole conversation.
    assert sorted(b["previous_interaction_id"] for b in after) == ["int-1-1", "int-2-1"]
    assert all([s["type"] for s in b["input"]] == ["function_result"] for b in after)


def test_a_parked_run_survives_a_kill_and_completes_on_a_decision_after_the_restore(
    tmp_path: Path,
) -> None:
    order = f"KR-{uuid.uuid4().hex[:8]}"
    inputs, requests = tmp_path / "inputs", tmp_path / "approval-requests"
    inputs.mkdir()
    park = {"id": "park-1", "key": "p", "text": f"scenario:refund {order}"}
    (inputs / "inputs.jsonl").write_text(json.dumps(park) + "\n")
    approval = (
        "--approval-tool", "e2e_tools:refund_order", "--approval-requests", str(requests),
        "--inputs", str(inputs),
    )  # fmt: skip
    with LoopbackStubServer(GeminiScript()) as stub:
        # the request is committed by the checkpoint that holds the parked run
        run_until(job_command("run", tmp_path, stub, *approval), lambda: committed_lines(requests))
        checkpoint = latest_checkpoint(tmp_path)
        assert checkpoint is not None and committed_outputs(tmp_path) == []
        [request] = committed_lines(requests)
        decision = {"key": "p", "approval": {"call_id": request["call_id"], "decision": "approve"}}
        (inputs / "decisions.jsonl").write_text(json.dumps(decision) + "\n")
        run_until(
            job_command("run", tmp_path, stub, *approval, "--restore", str(checkpoint)),
            lambda: len(committed_outputs(tmp_path)) == 1,
        )
    [output] = committed_outputs(tmp_path)
    assert (output["id"], output["status"], output["text"]) == ("park-1", "ok", "refund handled")
    assert refunds_made(order) == [30]  # made once, after the restore, on the decision
    assert len(committed_lines(requests)) == 1  # the restored run did not ask again


FOLLOWUP_AFTER_S = 6.0


def test_a_followup_due_while_the_job_was_down_fires_after_the_restore(tmp_path: Path) -> None:
    watch = {"id": "fu-1", "key": "f", "text": f"scenario:followup {FOLLOWUP_AFTER_S} plain kr"}
    (tmp_path / "inputs.jsonl").write_text(json.dumps(watch) + "\n")
    with LoopbackStubServer(GeminiScript()) as stub:
        # the output is committed by a checkpoint that holds the follow-up in keyed state
        run_until(
            job_command("run", tmp_path, stub, "--followups"),
            lambda: len(committed_outputs(tmp_path)) == 1,
        )
        killed = time.monotonic()
        checkpoint = latest_checkpoint(tmp_path)
        assert checkpoint is not None
        assert [o["id"] for o in committed_outputs(tmp_path)] == ["fu-1"]
        time.sleep(max(0.0, killed + FOLLOWUP_AFTER_S - time.monotonic()))  # due while down
        run_until(
            job_command("run", tmp_path, stub, "--followups", "--restore", str(checkpoint)),
            lambda: len(committed_outputs(tmp_path)) == 2,
        )
    outputs = {o["id"]: o for o in committed_outputs(tmp_path)}
    [fired] = [o for name, o in outputs.items() if name.startswith("followup-")]
    assert (fired["key"], fired["status"], fired["text"]) == ("f", "ok", "ok fired-kr")
    assert (
        fired["attributes"]["followup"]["due_ms"] - fired["attributes"]["followup"]["scheduled_ms"]
        == FOLLOWUP_AFTER_S * 1000
    )


HEADER_SECRET = "Bearer collector-token-0123456789abcdef"


def test_a_restored_run_continues_its_trace_with_the_ids_of_its_event_log(
    tmp_path: Path,
) -> None:
    """Live spans from a job killed mid-run and restored: the restored runs' spans join the
    traces begun before the kill, and every id is the one the offline export of the event
    log gives; no span holds media bytes, the API key or the collector's header."""
    photos = [{"id": f"photo-{n}", "key": f"p{n}", "text": f"scenario:photo {n}"} for n in (1, 2)]
    (tmp_path / "inputs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in photos))
    script = InteractionsPhotoScript(hold_s=60)
    ok = StubReply(b"", headers={})
    log = tmp_path / "events"
    with LoopbackStubServer(lambda _request: ok) as collector, LoopbackStubServer(script) as stub:
        options = (
            *("--provider", "gemini-interactions", "--tool", "e2e_tools:make_image"),
            *("--event-log", str(log), "--telemetry", collector.url),
            *("--telemetry-header", f"Authorization={HEADER_SECRET}"),
        )
        held = continuations_checkpointed(tmp_path, stub, len(photos))

        def first_steps_sent() -> bool:  # each run's first model call and tool call
            if not held() or len(received_spans(collector, "operator-recovery")) < 4:
                return False
            # A kill loses the log's last unflushed second (docs/eventlog.md): kill only
            # once the events from before the checkpoint are flushed (both model calls'
            # requests and the tool's response of each run).
            events = read_events(log, typed=True, include_in_progress=True, damaged=[])
            kinds = [e.event_type for e in events]
            return kinds.count(EventType.CHAT_REQUEST) >= 2 * len(photos) and kinds.count(
                EventType.TOOL_RESPONSE
            ) >= len(photos)

        run_until(job_command("run", tmp_path, stub, *options), first_steps_sent)
        checkpoint = latest_checkpoint(tmp_path)
        assert checkpoint is not None
        before = received_spans(collector, "operator-recovery")
        script.hold_s = 0

        def runs_sent_and_logged() -> bool:  # the log's flusher writes every few seconds
            spans = received_spans(collector, "operator-recovery")
            if sum(not s.parent_span_id for s in spans) < len(photos):
                return False
            events = read_events(log, typed=True, include_in_progress=True, damaged=[])
            return sum(e.event_type is EventType.OUTPUT for e in events) == len(photos)

        run_until(
            job_command("run", tmp_path, stub, *options, "--restore", str(checkpoint)),
            runs_sent_and_logged,
        )
        spans = received_spans(collector, "operator-recovery")
        assert all(r.headers["authorization"] == HEADER_SECRET for r in collector.requests)
    assert sorted(s.name for s in before) == [
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
    events = read_events(log, typed=True, include_in_progress=True)
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
    media = [f.read_bytes() for f in (tmp_path / "media").rglob("*") if f.is_file()]
    assert any(image_bytes(1) == m for m in media)
    for data in media:
        assert data[:200] not in raw and base64.b64encode(data)[:200] not in raw
    assert b"test-key" not in raw and HEADER_SECRET.encode() not in raw
