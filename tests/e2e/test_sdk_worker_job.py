"""A mini-cluster job whose Gemini calls go through the SDK worker process (`sdk_process`):
the runs, tool loops and tool media behave as in-process, and the subtask's worker is gone
once the job ends, or is cancelled."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import e2e_tools
import pytest
from doubles import GeminiScript, function_responses
from pyflink.common import Types
from scripted_job import scripted_environment, stub_gemini

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.operators.agent import AgentConfig
from streamagents.operators.flink import agent_stream
from streamagents.serde.messages import decode_base64

pytestmark = pytest.mark.e2e

TOOL_IMAGE = e2e_tools.image_bytes(7)
INPUTS = [
    *({"id": f"plain-{i}", "key": f"k{i % 3}", "text": f"scenario:plain n{i}"} for i in range(12)),
    {"id": "img-1", "key": "image", "text": "scenario:image show me picture 7"},
    {"id": "two-1", "key": "two", "text": "scenario:two_step weather in Paris?"},
]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def sdk_workers() -> list[int]:
    """The pids of the SDK worker processes this test's JVM (a TaskManager's) started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if b"providers.sdk_worker" not in (entry / "cmdline").read_bytes():
                continue
            parent = _parent(int(entry.name))
            ancestor = parent
            while ancestor > 1 and ancestor != os.getpid():
                ancestor = _parent(ancestor)
        except (OSError, ValueError, IndexError):
            continue
        if ancestor == os.getpid() and b"java" in Path(f"/proc/{parent}/cmdline").read_bytes():
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the job once; return its outputs, the stub's wire log and the workers seen."""
    root = tmp_path_factory.mktemp("sdk-worker-e2e")
    script = GeminiScript()
    seen: set[int] = set()

    def recording(request: Any) -> Any:
        seen.update(sdk_workers())  # the worker is alive while it sends
        return script(request)

    with LoopbackStubServer(recording) as stub:
        env = scripted_environment()
        model = stub_gemini(stub.url).model_copy(update={"sdk_process": True})
        config = AgentConfig(
            job_id="sdk-worker-e2e",
            model=model,
            tools=e2e_tools.TOOL_PATHS,
            max_in_flight=8,
            media_store=str(root / "media"),
        )
        lines = [json.dumps(r) for r in INPUTS]
        streams = agent_stream(env.from_collection(lines, type_info=Types.STRING()), config)
        with streams.outputs.execute_and_collect("sdk-worker-e2e") as results:
            outputs = [json.loads(text) for text in results]
    return {"outputs": outputs, "script": script, "workers": seen, "after": sdk_workers()}


def output_of(job: dict[str, Any], input_id: str) -> dict[str, Any]:
    (found,) = [o for o in job["outputs"] if o["id"] == input_id]
    return found


def test_every_input_has_one_ok_output(job: dict[str, Any]) -> None:
    assert Counter(o["id"] for o in job["outputs"]) == Counter(r["id"] for r in INPUTS)
    assert {o["status"] for o in job["outputs"]} == {"ok"}


def test_a_keys_history_reaches_the_model_through_the_worker(job: dict[str, Any]) -> None:
    """Key k0's fourth run sends the three runs before it (6 messages) and its input."""
    (last,) = job["script"].turns_of("scenario:plain n9")
    sent = [t["text"] for c in last.body["contents"] for t in c.get("parts", []) if "text" in t]
    assert [t for t in sent if t.startswith("scenario:")] == [
        f"scenario:plain n{i}" for i in (0, 3, 6, 9)
    ]


def test_tool_media_and_a_tool_loop_go_back_to_the_model(job: dict[str, Any]) -> None:
    after_tool = job["script"].turns_of("scenario:image")[1]
    (response,) = function_responses(after_tool.body)
    blobs = [p["inline_data"] for p in response["parts"] if "inline_data" in p]
    assert decode_base64(blobs[0]["data"], "data") == TOOL_IMAGE
    assert output_of(job, "img-1")["text"] == "saw picture 7"
    assert (output_of(job, "two-1")["model_calls"], output_of(job, "two-1")["tool_calls"]) == (3, 2)


def test_the_calls_went_through_a_worker_that_ended_with_the_job(job: dict[str, Any]) -> None:
    assert len(job["workers"]) == 1, "one worker for the one agent subtask"
    assert not set(job["after"]) & job["workers"]


def test_a_cancelled_jobs_worker_ends_though_the_taskmanager_goes_on() -> None:
    """Closing the results of an unbounded-looking job (slow calls, most inputs still
    waiting) cancels it; the mini-cluster's JVM, this test's TaskManager, runs on, and the
    job's worker must not: a worker left per cancelled job would pile up in a TaskManager
    that serves job after job."""
    lines = [
        json.dumps({"id": f"slow-{i}", "key": f"k{i % 4}", "text": f"scenario:slow n{i}"})
        for i in range(40)
    ]
    seen: set[int] = set()
    script = GeminiScript()

    def recording(request: Any) -> Any:
        seen.update(sdk_workers())
        return script(request)

    with LoopbackStubServer(recording) as stub:
        env = scripted_environment()
        model = stub_gemini(stub.url).model_copy(update={"sdk_process": True})
        config = AgentConfig(job_id="sdk-worker-cancel", model=model, max_in_flight=4)
        streams = agent_stream(env.from_collection(lines, type_info=Types.STRING()), config)
        with streams.outputs.execute_and_collect("sdk-worker-cancel") as results:
            first = [json.loads(next(results)) for _ in range(2)]
        deadline = time.monotonic() + 20
        while set(sdk_workers()) & seen and time.monotonic() < deadline:
            time.sleep(0.2)
    assert [o["status"] for o in first] == ["ok", "ok"]
    assert len(seen) == 1, "the job's calls went through its one worker"
    assert not set(sdk_workers()) & seen, "the cancelled job's worker is still running"
