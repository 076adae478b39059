"""The agent operator end to end: one mini-cluster job, a real Gemini adapter, a loopback stub.

The job runs every scenario of `gemini_script` at once (parallelism 2, at most two inputs
waiting per subtask, a one-second memory TTL); the tests below each check one promised
behaviour on what the job emitted and what the stub received. What the engine does
without Flink (per-key order, the bounds on calls in flight and waiting inputs, the memory
TTL, numbering inputs without an id, run budgets) is tested on the in-memory port in
tests/operators/engine/.
(That keyed state holds media refs, not bytes, is checked on checkpoints in
`test_operator_recovery.py`, whose job keeps checkpointing while runs are pending.)
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from typing import Any

import doubles
import e2e_tools
import provider_wire
import pytest
from doubles import GeminiScript, StepFailsRuntime, function_responses
from flink_rest import JobSampler, agent_metrics
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from streamagents.connectors.loopback_stub import LoopbackStubServer
from streamagents.jobs.cluster.standalone import free_port
from streamagents.operators.agent import AgentConfig, Budgets, MemoryConfig, ModelSpec
from streamagents.operators.engine.metrics import model_metric
from streamagents.operators.flink import agent_stream, configure_environment
from streamagents.serde.messages import decode_base64

pytestmark = pytest.mark.e2e

TOOL_IMAGE = e2e_tools.image_bytes(7)
PHOTO = e2e_tools.image_bytes(99, 5000)
MEMORY_TTL_S = 1.0
MAX_WAITING = 2
"""The job's `max_waiting_inputs`: far fewer than the inputs queued behind busy keys."""

GOOD = [
    {"id": "img-1", "key": "image", "text": "scenario:image show me picture 7"},
    {"id": "two-1", "key": "two", "text": "scenario:two_step weather in Paris?"},
    {"id": "par-1", "key": "par", "text": "scenario:parallel run both"},
    {"id": "err-1", "key": "err", "text": "scenario:tool_error read it"},
    {"id": "exit-1", "key": "exit", "text": "scenario:exits try them"},
    {
        "id": "photo-1",
        "key": "photo",
        "text": "scenario:photo describe",
        "parts": [
            {"kind": "image", "mime_type": "image/png", "data": base64.b64encode(PHOTO).decode()}
        ],
    },
    {"id": "broken-1", "key": "broken", "text": "scenario:broken please"},
    *({"id": f"plain-{i}", "key": f"p{i % 10}", "text": f"scenario:plain n{i}"} for i in range(40)),
    {"id": "exit-2", "key": "exit", "text": "scenario:plain after-exit"},
]
ABANDONED = {"id": "abandon-1", "key": "abandon", "text": "scenario:plain " + "long " * 400}
"""Its run fails in the engine after its model call; its line (over 1 KiB) waits in the store."""
BAD = [
    "not json",
    json.dumps({"key": "x"}),
    json.dumps({"id": "nokey-1", "text": "no key here"}),
    json.dumps({"key": "b", "parts": [{"kind": "image", "mime_type": "image/png", "data": "!!"}]}),
    json.dumps(
        {"key": "b", "parts": [{"kind": "image", "mime_type": "text/plain", "data": "aGk="}]}
    ),
    '{"key": "deep", "text": "hi", "x": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"key": "nan", "text": "hi", "score": NaN}',
    '{"key": "surrogate", "text": "a\\ud800"}',
    json.dumps({"key": "K" * 5000, "text": "hi"}),
    "[" * 1000 + "]" * 1000,
]


class RestMetrics(JobSampler):
    """Samples the agent operator's metrics through the mini-cluster's REST API while it runs."""

    def __init__(self, port: int, vertex: str) -> None:
        super().__init__(port, every_s=0.2)
        self.vertex = vertex
        self.sums: dict[str, float] = {}

    def sample(self, job_id: str) -> None:
        """The latest sums of the agent vertex's metrics."""
        self.sums.update(agent_metrics(self.address, job_id, self.vertex))


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Run the shared job once; yield what it emitted, the wire log and its folders."""
    root = tmp_path_factory.mktemp("operator-e2e")
    script = GeminiScript()
    with LoopbackStubServer(script) as stub:
        conf = configure_environment(Configuration())
        port = free_port()
        conf.set_string("rest.port", str(port))
        conf.set_string("metrics.fetcher.update-interval", "200")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(2)
        for module in (e2e_tools, doubles, provider_wire):
            env.add_python_file(module.__file__)
        config = AgentConfig(
            job_id="operator-e2e",
            model=ModelSpec(
                provider="gemini",
                model="gemini-3-flash-preview",
                options={"api_key": "test-key", "base_url": stub.url, "max_retries": 0},
            ),
            system_prompt="You are the e2e test agent.",
            tools=e2e_tools.TOOL_PATHS,
            max_in_flight=8,
            max_waiting_inputs=MAX_WAITING,
            budgets=Budgets(max_model_calls=3, run_timeout_s=60),
            memory=MemoryConfig(ttl_seconds=MEMORY_TTL_S),
            media_store=str(root / "media"),
            offload_threshold_bytes=1024,
        )
        lines = [json.dumps(r) for r in [*GOOD, ABANDONED]] + BAD
        records = env.from_collection(lines, type_info=Types.STRING())
        streams = agent_stream(records, config, runtime_factory=StepFailsRuntime.from_config)
        tagged = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
            streams.events.map(lambda s: ("event", s), Types.PICKLED_BYTE_ARRAY()),
            streams.dead_letters.map(lambda s: ("dead", s), Types.PICKLED_BYTE_ARRAY()),
        )
        with (
            RestMetrics(port, "operator-e2e-agent") as metrics,
            tagged.execute_and_collect("operator-e2e") as results,
        ):
            emitted = list(results)
    by_kind: dict[str, list[dict[str, Any]]] = {"output": [], "event": [], "dead": []}
    for kind, text in emitted:
        by_kind[kind].append(json.loads(text))
    return {
        "outputs": by_kind["output"],
        "events": by_kind["event"],
        "dead": by_kind["dead"],
        "script": script,
        "root": root,
        "metrics": metrics.sums,
    }


def request_texts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The text parts of a recorded generateContent request's contents, in order."""
    return [t for c in body["contents"] for t in c.get("parts", []) if "text" in t]


def output_of(job: Any, input_id: str) -> dict[str, Any]:
    """The single output of an input."""
    found = [o for o in job["outputs"] if o["id"] == input_id]
    assert len(found) == 1, f"{input_id}: {len(found)} outputs"
    return found[0]


def test_every_good_input_has_exactly_one_output(job: Any) -> None:
    counts = Counter(o["id"] for o in job["outputs"])
    assert counts == Counter(r["id"] for r in GOOD)


def test_tool_image_bytes_reach_the_model_inside_the_function_response(job: Any) -> None:
    after_tool = job["script"].turns_of("scenario:image")[1]
    responses = list(function_responses(after_tool.body))
    assert [r["name"] for r in responses] == ["make_image"]
    blobs = [p["inline_data"] for p in responses[0]["parts"] if "inline_data" in p]
    assert [b["mime_type"] for b in blobs] == ["image/png"]
    assert decode_base64(blobs[0]["data"], "data") == TOOL_IMAGE
    output = output_of(job, "img-1")
    assert (output["status"], output["text"]) == ("ok", "saw picture 7")
    assert (output["model_calls"], output["tool_calls"]) == (2, 1)


def test_two_step_tool_loop_feeds_each_result_back_then_answers(job: Any) -> None:
    turns = job["script"].turns_of("scenario:two_step")
    assert [t.step for t in turns] == [0, 1, 2]
    assert [r["name"] for r in function_responses(turns[2].body)] == ["lookup_city", "weather"]
    assert "sunny in Paris" in json.dumps(list(function_responses(turns[2].body))[1])
    output = output_of(job, "two-1")
    assert (output["status"], output["text"]) == ("ok", "Paris is sunny")
    assert (output["model_calls"], output["tool_calls"]) == (3, 2)


def test_parallel_tool_calls_of_one_turn_run_concurrently(job: Any) -> None:
    after = job["script"].turns_of("scenario:parallel")[1]
    responses = list(function_responses(after.body))
    assert [(r["name"], r["id"]) for r in responses] == [("slow_a", "call-0"), ("slow_b", "call-1")]
    texts = [" ".join(str(v) for v in r["response"].values()) for r in responses]
    (a_start, a_end), (b_start, b_end) = ([float(x) for x in t.split()[1:3]] for t in texts)
    assert a_start < b_end and b_start < a_end, "the two tool calls did not overlap"
    assert output_of(job, "par-1")["tool_calls"] == 2


def test_tool_error_goes_back_to_the_model_and_the_run_goes_on(job: Any) -> None:
    after = job["script"].turns_of("scenario:tool_error")[1]
    (response,) = function_responses(after.body)
    assert "sensor offline" in json.dumps(response["response"])
    output = output_of(job, "err-1")
    assert (output["status"], output["text"]) == ("ok", "the sensor is offline")
    tool_events = [
        e for e in job["events"] if e["event_type"] == "tool_response" and e["key"] == "err"
    ]
    assert len(tool_events) == 1
    assert "sensor offline" in json.dumps(tool_events[0])


def test_tools_raising_system_exit_or_keyboard_interrupt_leave_the_subtask_working(
    job: Any,
) -> None:
    after = job["script"].turns_of("scenario:exits")[1]
    responses = [json.dumps(r["response"]) for r in function_responses(after.body)]
    assert len(responses) == 2
    assert "SystemExit: 2" in responses[0] and "KeyboardInterrupt" in responses[1]
    assert (output_of(job, "exit-1")["status"], output_of(job, "exit-1")["text"]) == (
        "ok",
        "the tools refused",
    )
    later = output_of(job, "exit-2")  # same key, so same subtask and loop, run after exit-1
    assert (later["status"], later["text"]) == ("ok", "ok after-exit")


def test_bad_records_go_to_dead_letters_with_reason_and_raw_input(job: Any) -> None:
    parse_letters = [d for d in job["dead"] if d["stage"] == "parse"]
    assert sorted(d["input"] for d in parse_letters) == sorted(BAD)
    by_input = {d["input"]: d for d in parse_letters}
    assert by_input["not json"]["error_type"] == "InvalidJson"
    assert "key" in by_input[BAD[2]]["reason"] and by_input[BAD[2]]["id"] == "nokey-1"
    assert "base64" in by_input[BAD[3]]["reason"]
    assert "mime_type" in by_input[BAD[4]]["reason"]
    assert [by_input[raw]["error_type"] for raw in BAD[5:]] == [
        "InputTooDeep",
        "InvalidNumber",
        "InvalidText",
        "InvalidKey",
        "InputTooDeep",
    ]
    assert "nests deeper than 64 levels" in by_input[BAD[5]]["reason"]
    assert by_input[BAD[7]]["reason"].startswith("text holds a lone surrogate")
    assert "KKKK" not in by_input[BAD[8]]["reason"]


def test_a_provider_error_ends_the_run_with_an_error_output_and_a_dead_letter(job: Any) -> None:
    output = output_of(job, "broken-1")
    assert output["status"] == "error"
    assert "the stub refuses" in output["error"]["message"]
    (letter,) = [d for d in job["dead"] if d["key"] == "broken"]
    assert (letter["id"], letter["stage"]) == ("broken-1", "run")
    assert json.loads(letter["input"])["text"] == "scenario:broken please"


def test_a_run_the_engine_abandons_dead_letters_its_whole_input_from_the_store(
    job: Any,
) -> None:
    (letter,) = [d for d in job["dead"] if d["key"] == "abandon"]
    assert (letter["stage"], letter["error_type"], letter["id"]) == (
        "run",
        "RuntimeError",
        "abandon-1",
    )
    assert letter["input"] == json.dumps(ABANDONED)
    assert not [o for o in job["outputs"] if o["id"] == "abandon-1"]


def test_input_image_is_offloaded_and_resolved_into_the_request(job: Any) -> None:
    (turn,) = job["script"].turns_of("scenario:photo")
    blobs = [
        p["inline_data"] for c in turn.body["contents"] for p in c["parts"] if "inline_data" in p
    ]
    assert [decode_base64(b["data"], "data") for b in blobs] == [PHOTO]
    stored = {p.name for p in (job["root"] / "media").rglob("*") if p.is_file()}
    assert {hashlib.sha256(PHOTO).hexdigest(), hashlib.sha256(TOOL_IMAGE).hexdigest()} <= stored
    assert output_of(job, "photo-1")["status"] == "ok"


def test_events_chain_each_run_from_input_to_output(job: Any) -> None:
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in (e for e in job["events"] if e["key"] != ABANDONED["key"]):
        runs.setdefault(event["run_id"], []).append(event)
    assert len(runs) == len(GOOD)
    for events in runs.values():
        events.sort(key=lambda e: e["sequence"])
        assert events[0]["event_type"] == "input"
        assert events[-1]["event_type"] == "output"
        ids = {e["event_id"] for e in events}
        assert all(e["upstream_event_id"] in ids for e in events[1:])


def test_metrics_count_runs_calls_and_tokens(job: Any) -> None:
    metrics = job["metrics"]
    assert {"in_flight", "busy_keys", "model_latency_p50_ms", "model_latency_ms"} <= set(metrics)
    assert metrics["runs_started"] >= 10
    assert metrics["model_calls"] >= metrics["runs_finished"] > 0
    assert metrics["tool_calls"] > 0
    assert metrics["tokens_in"] > 0 and metrics["tokens_out"] > 0
    assert metrics["tokens_cached"] == 0  # registered; this job caches nothing
    assert metrics["model_latency_p50_ms"] > 0
    # The calls each model answered, under a name Flink keeps as given (a single model here).
    assert metrics[model_metric("gemini/gemini-3-flash-preview")] > 0
    assert (metrics["failovers"], metrics["breakers_open"]) == (0, 0)


def test_outputs_and_metrics_carry_the_cost_of_each_call(job: Any) -> None:
    answered = [o for o in job["outputs"] if o["status"] == "ok"]
    assert answered
    for output in answered:  # gemini-3-flash-preview is in the price table
        assert len(output["call_costs_usd"]) == output["model_calls"]
        assert all(cost > 0 for cost in output["call_costs_usd"])
        assert output["cost_usd"] == pytest.approx(sum(output["call_costs_usd"]))
    metrics = job["metrics"]
    assert metrics["cost_microusd"] > 0 and metrics["calls_unpriced"] == 0
