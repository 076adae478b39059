"""A thousand runs parked on approvals in one mini-cluster job: no thread, no call slot and a
bounded few KB of keyed state each, and every run completes once approved.

The job watches a folder: the test drops 20 tickets (each a run that calls `refund_order`,
which needs approval) and samples the TaskManager process's threads once they are parked,
then 980 more and samples again with all 1,000 parked, reads the agent's metrics (calls in
flight, busy keys) and the size of a checkpoint completed while they wait against one taken
before any input, and finally drops the 1,000 approvals and collects every answer.
`max_in_flight` is 16: were a parked run to hold its call slot, the 17th could not start.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import doubles
import e2e_tools
import provider_wire
import pytest
from doubles import GeminiScript
from flink_rest import agent_metrics
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment
from scripted_job import stub_gemini

from streamagents.connectors.files import jsonl_source
from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.jobs.cluster import free_port, rest_call
from streamagents.operators.agent import AgentConfig
from streamagents.operators.agent.config import ToolRef
from streamagents.operators.agent.run_state import run_id_for
from streamagents.operators.flink import agent_stream, configure_environment

pytestmark = pytest.mark.e2e

JOB_ID = "parked-thousand"
RUNS = 1000
FIRST = 20
MAX_IN_FLIGHT = 16
PARKED_RUN_BYTES = 1780
"""bench_parked's figure for a support-desk run parked on one approval (docs/approvals.md)."""
STATE_BOUND_PER_RUN = 2 * PARKED_RUN_BYTES
"""Checkpointed bytes a parked run may add, all its keyed state and timers included."""
THREAD_MARGIN = 16
"""Threads the process may gain between 20 and 1,000 parked runs (JIT, checkpoint pools)."""
WAIT_S = 120.0
TOKEN = uuid.uuid4().hex[:8]


def order(n: int) -> str:
    return f"PK{n}-{TOKEN}"


def ticket(n: int) -> str:
    return json.dumps({"id": f"t-{n}", "key": f"c-{n}", "text": f"scenario:refund {order(n)}"})


def approval(n: int) -> str:
    call_id = f"{run_id_for(JOB_ID, f't-{n}')}.0004"
    return json.dumps({"key": f"c-{n}", "approval": {"call_id": call_id, "decision": "approve"}})


def drop(inbox: Path, name: str, lines: list[str]) -> None:
    """Put a JSONL file into the watched folder whole (written beside it, then renamed)."""
    staged = inbox.parent / name
    staged.write_text("\n".join(lines) + "\n")
    os.rename(staged, inbox / name)


def process_threads() -> int:
    """OS threads of the JVM running the mini-cluster and its embedded Python (a child of
    this process, PyFlink's gateway)."""
    mine = str(os.getpid())
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
        except (OSError, ValueError):
            continue
        if fields.get("PPid", "").strip() == mine and fields.get("Name", "").strip() == "java":
            return int(fields["Threads"])
    raise AssertionError("no java child process: where does the mini-cluster run?")


class Watch:
    """The running job seen through the mini-cluster's REST API."""

    def __init__(self, port: int) -> None:
        self.address = f"127.0.0.1:{port}"
        self.job_id = ""

    def until(self, what: str, check: Callable[[], Any]) -> Any:
        """Poll `check` until it returns something truthy; fail naming `what` after WAIT_S."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                if not self.job_id:
                    self.job_id = rest_call(self.address, "/jobs/overview")["jobs"][0]["jid"]
                found = check()
            except (OSError, KeyError, IndexError, ValueError, StopIteration):
                found = None
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"gave up waiting for {what}")

    def metrics(self) -> dict[str, float]:
        return agent_metrics(self.address, self.job_id, f"{JOB_ID}-agent")

    def checkpoint_after(self, moment_ms: float) -> dict[str, Any] | None:
        """The latest completed checkpoint if it was triggered after `moment_ms`."""
        stats = rest_call(self.address, f"/jobs/{self.job_id}/checkpoints")
        latest = (stats.get("latest") or {}).get("completed")
        return latest if latest and latest["trigger_timestamp"] > moment_ms else None

    def all_parked(self, runs: int) -> dict[str, float] | None:
        """The metrics once `runs` runs started and nothing is in flight or busy."""
        found = self.metrics()
        settled = found.get("runs_started") == runs and found.get("in_flight") == 0
        return found if settled and found.get("busy_keys") == 0 else None


def take(results: Iterator[Any], found: dict[str, list[dict[str, Any]]], kind: str, n: int) -> None:
    """Read the job's records until `n` of `kind` are in."""
    while len(found[kind]) < n:
        tag, text = next(results)
        found[tag].append(json.loads(text))


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the job through its phases; return what it emitted and what was measured."""
    root = tmp_path_factory.mktemp("parked-thousand")
    inbox = root / "inbox"
    inbox.mkdir()
    port = free_port()
    conf = configure_environment(Configuration())
    conf.set_string("rest.port", str(port))
    conf.set_string("metrics.fetcher.update-interval", "200")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.enable_checkpointing(1000)
    for module in (e2e_tools, doubles, provider_wire):
        env.add_python_file(module.__file__)
    script = GeminiScript()
    found: dict[str, list[dict[str, Any]]] = {"output": [], "dead": [], "ask": []}
    watch = Watch(port)
    figures: dict[str, Any] = {}
    with LoopbackStubServer(script) as stub:
        config = AgentConfig(
            job_id=JOB_ID,
            model=stub_gemini(stub.url),
            tools=[ToolRef(ref="e2e_tools:refund_order", approval="required")],
            max_in_flight=MAX_IN_FLIGHT,
            event_log_level="off",
            media_store=str(root / "media"),
        )
        streams = agent_stream(jsonl_source(env, str(inbox), watch_interval_s=0.2), config)
        tagged = streams.outputs.map(lambda s: ("output", s)).union(
            streams.dead_letters.map(lambda s: ("dead", s)),
            streams.approval_requests.map(lambda s: ("ask", s)),
        )
        with tagged.execute_and_collect(JOB_ID) as results:
            started = time.time() * 1000
            figures["empty"] = watch.until("a checkpoint", lambda: watch.checkpoint_after(0))
            drop(inbox, "first.jsonl", [ticket(n) for n in range(FIRST)])
            take(results, found, "ask", FIRST)
            watch.until(f"{FIRST} parked runs", lambda: watch.all_parked(FIRST))
            figures["threads_few"] = process_threads()
            drop(inbox, "rest.jsonl", [ticket(n) for n in range(FIRST, RUNS)])
            take(results, found, "ask", RUNS)
            figures["parked_metrics"] = watch.until(
                f"{RUNS} parked runs", lambda: watch.all_parked(RUNS)
            )
            figures["threads_all"] = process_threads()
            parked_at = time.time() * 1000
            figures["parked"] = watch.until(
                "a checkpoint of the parked runs", lambda: watch.checkpoint_after(parked_at)
            )
            figures["parked_s"] = (parked_at - started) / 1000
            drop(inbox, "approvals.jsonl", [approval(n) for n in range(RUNS)])
            take(results, found, "output", RUNS)
    return {**found, **figures, "script": script}


def test_parked_runs_hold_no_thread(job: dict[str, Any]) -> None:
    print(f"threads with {FIRST} parked: {job['threads_few']}, with {RUNS}: {job['threads_all']}")
    assert job["threads_all"] <= job["threads_few"] + THREAD_MARGIN


def test_parked_runs_hold_no_call_slot_and_make_no_key_busy(job: dict[str, Any]) -> None:
    metrics = job["parked_metrics"]
    assert (metrics["in_flight"], metrics["busy_keys"]) == (0, 0)
    assert metrics["runs_started"] == RUNS > MAX_IN_FLIGHT
    assert len({a["call_id"] for a in job["ask"]}) == RUNS


def test_each_parked_run_costs_a_bounded_few_kilobytes_of_checkpointed_state(
    job: dict[str, Any],
) -> None:
    added = job["parked"]["state_size"] - job["empty"]["state_size"]
    print(f"checkpointed state: {added / RUNS:.0f} B per parked run ({added / 2**20:.2f} MiB)")
    assert RUNS * 200 < added < RUNS * STATE_BOUND_PER_RUN


def test_every_parked_run_completes_once_approved_and_nothing_is_lost(job: dict[str, Any]) -> None:
    assert job["dead"] == []
    assert sorted(o["id"] for o in job["output"]) == sorted(f"t-{n}" for n in range(RUNS))
    assert {(o["status"], o["text"]) for o in job["output"]} == {("ok", "refund handled")}
    made = [p.name.split(".")[0] for p in e2e_tools.REFUNDS.glob(f"PK*-{TOKEN}.*")]
    assert sorted(made) == sorted(order(n) for n in range(RUNS))  # each refund made once
