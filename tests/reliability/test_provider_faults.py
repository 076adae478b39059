"""Provider faults under load: thousands of turns through one real job against a faulty stub.

One mini-cluster job (parallelism 2) runs `INPUTS` turns over `KEYS` keys through the real
Gemini adapter, pointed at a loopback stub that answers each attempt with a fault at set,
seeded rates: 429 with Retry-After, 500, 503, a reply slower than the adapter's timeout,
the silent empty reply, a malformed 2xx body, and a dropped connection. The fault an
attempt gets depends only on the seed, the input's id and the attempt's number, so a run
is reproducible whatever the threads' order.

What a user relies on is checked on what the job emitted and what the stub received:
every input ends with exactly one output (`ok` or `error`), an error names the provider
error class, the job never restarts, and retries keep to the policy and the retry budget.
The figures are printed and written to `provider_faults.json` in the test's tmp folder.
"""

from __future__ import annotations

import json
import random
import threading
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from flink_rest import JobSampler
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.providers import RateLimits, RetryBudgetSettings, RetryPolicy
from streamagents.jobs.cluster.standalone import free_port
from streamagents.operators.agent import AgentConfig, Budgets, ModelSpec
from streamagents.operators.flink import agent_stream, configure_environment

SEED = 20261130
INPUTS = 2000
KEYS = 200
PARALLELISM = 2
TIMEOUT_S = 2.0
RETRY_AFTER_S = 0.05
MAX_RETRIES = 2
POLICY = RetryPolicy(initial_delay_s=0.01, max_delay_s=0.05, jitter=0.5)
BUDGET_RATIO = 0.2
BUDGET_RESERVE = 10.0
FAULT_RATES = {
    "429": 0.05,
    "500": 0.03,
    "503": 0.03,
    "slow": 0.02,
    "empty": 0.03,
    "malformed": 0.03,
    "drop": 0.03,
}
"""Chance that one attempt meets each fault; the rest are good replies."""
PROVIDER_ERRORS = {
    "RateLimited",
    "ServerError",
    "MalformedResponse",
    "RequestTimeout",
    "ConnectionFailed",
    "EmptyResponseError",
}
"""The adapter's error classes these faults can end in once retries are spent."""


def _text_reply(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7},
    }


def _error_body(status: int) -> dict[str, Any]:
    return {"error": {"code": status, "message": f"injected {status}", "status": f"S{status}"}}


REPLIES = {
    "429": StubReply(_error_body(429), status=429, headers={"Retry-After": str(RETRY_AFTER_S)}),
    "500": StubReply(_error_body(500), status=500),
    "503": StubReply(_error_body(503), status=503),
    "empty": StubReply({"candidates": []}),
    "malformed": StubReply(b'{"candidates": [{"content": '),
    "drop": StubReply(drop=True),
}


class FaultyGemini:
    """The stub's responder: picks each attempt's fault from (seed, input id, attempt)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.attempts: dict[str, list[str]] = defaultdict(list)
        """Per input id, what each attempt was answered with, in order."""

    @staticmethod
    def turn_id(request: RecordedRequest) -> str:
        """The id in the last user text: earlier turns of the key are in memory (an errored
        turn's user message stays there, in the same user content as the next one)."""
        user = [c for c in request.json["contents"] if c.get("role") == "user"]
        text = " ".join(p.get("text", "") for p in user[-1]["parts"])
        return text.rsplit("turn:", 1)[1].split()[0]

    def __call__(self, request: RecordedRequest) -> StubReply:
        turn = self.turn_id(request)
        with self._lock:
            attempt = len(self.attempts[turn])
            rng = random.Random(zlib.crc32(f"{SEED}/{turn}/{attempt}".encode()))
            draw = rng.random()
            kind = "ok"
            for name, rate in FAULT_RATES.items():
                if draw < rate:
                    kind = name
                    break
                draw -= rate
            self.attempts[turn].append(kind)
        if kind == "ok":
            return StubReply(_text_reply(f"answer to {turn}"))
        if kind == "slow":
            return StubReply(_text_reply(f"late answer to {turn}"), delay_s=TIMEOUT_S + 1.0)
        return REPLIES[kind]


class JobWatch(JobSampler):
    """Samples the job's `numRestarts` metric and its exception history over REST."""

    def __init__(self, port: int) -> None:
        super().__init__(port, every_s=0.2)
        self.samples = 0
        self.max_restarts = 0
        self.exceptions: list[str] = []

    def sample(self, job_id: str) -> None:
        """The exception history so far (a restart always leaves an entry) and the highest
        restart count seen, once the metric is registered (on a loaded machine a short job
        can end before it is)."""
        history = self.get(f"/jobs/{job_id}/exceptions")
        entries = history.get("exceptionHistory", {}).get("entries", [])
        self.exceptions = [e.get("exceptionName", "?") for e in entries]
        self.samples += 1
        metric = self.get(f"/jobs/{job_id}/metrics?get=numRestarts")
        self.max_restarts = max(self.max_restarts, int(float(metric[0]["value"])))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the job once; return what it emitted, what the stub saw, and the job's health."""
    root = tmp_path_factory.mktemp("provider-faults")
    responder = FaultyGemini()
    lines = [
        json.dumps({"id": f"in-{i}", "key": f"k{i % KEYS}", "text": f"turn:in-{i} hello"})
        for i in range(INPUTS)
    ]
    started = time.monotonic()
    with LoopbackStubServer(responder) as stub:
        conf = configure_environment(Configuration())
        port = free_port()
        conf.set_string("rest.port", str(port))
        # A task that failed would restart (and show in numRestarts) rather than end the job.
        conf.set_string("restart-strategy.type", "fixed-delay")
        conf.set_string("restart-strategy.fixed-delay.attempts", "3")
        conf.set_string("restart-strategy.fixed-delay.delay", "1 s")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(PARALLELISM)
        config = AgentConfig(
            job_id="provider-faults",
            model=ModelSpec(
                provider="gemini",
                model="gemini-3-flash-preview",
                # Injected 429s are random faults, not a quota: admission's adaptive rate and
                # its exemption of 429s from the retry budget would change what is measured.
                limits=RateLimits(adaptive=False),
                options={
                    "api_key": "test-key",
                    "base_url": stub.url,
                    "timeout": TIMEOUT_S,
                    "max_retries": MAX_RETRIES,
                    "retry": POLICY,
                    "retry_budget": RetryBudgetSettings(ratio=BUDGET_RATIO, reserve=BUDGET_RESERVE),
                },
            ),
            max_in_flight=32,
            budgets=Budgets(max_model_calls=2, run_timeout_s=120),
            media_store=str(root / "media"),
            event_log_level="off",
        )
        records = env.from_collection(lines, type_info=Types.STRING())
        streams = agent_stream(records, config)
        tagged = streams.outputs.map(lambda s: ("output", s), Types.PICKLED_BYTE_ARRAY()).union(
            streams.dead_letters.map(lambda s: ("dead", s), Types.PICKLED_BYTE_ARRAY())
        )
        with JobWatch(port) as watch, tagged.execute_and_collect("provider-faults") as results:
            emitted = list(results)
        requests = list(stub.requests)
    outputs = [json.loads(text) for kind, text in emitted if kind == "output"]
    dead = [json.loads(text) for kind, text in emitted if kind == "dead"]
    return {
        "root": root,
        "outputs": outputs,
        "dead": dead,
        "attempts": dict(responder.attempts),
        "requests": requests,
        "watch": watch,
        "seconds": time.monotonic() - started,
    }


def budgeted_retries(kinds: list[str]) -> int:
    """Retries that spent the budget: every attempt but the first and the one after an empty
    reply (the adapter's one free retry of the silent empty response)."""
    return sum(1 for before in kinds[:-1] if before != "empty")


@pytest.fixture(scope="module")
def figures(run: dict[str, Any]) -> dict[str, Any]:
    """The figures a docs page can quote; printed and written to provider_faults.json."""
    attempts = run["attempts"]
    requests = sum(len(kinds) for kinds in attempts.values())
    statuses = Counter(o["status"] for o in run["outputs"])
    result = {
        "inputs": INPUTS,
        "keys": KEYS,
        "parallelism": PARALLELISM,
        "seed": SEED,
        "fault_rates_per_attempt": FAULT_RATES,
        "policy": {
            "max_retries": MAX_RETRIES,
            "initial_delay_s": POLICY.initial_delay_s,
            "max_delay_s": POLICY.max_delay_s,
            "timeout_s": TIMEOUT_S,
            "retry_after_s": RETRY_AFTER_S,
            "budget_ratio": BUDGET_RATIO,
            "budget_reserve": BUDGET_RESERVE,
        },
        "requests": requests,
        "requests_per_turn": round(requests / INPUTS, 4),
        "turns_the_stub_never_saw": INPUTS - len(attempts),
        "max_requests_for_one_turn": max((len(k) for k in attempts.values()), default=0),
        "faults_injected": dict(
            Counter(k for kinds in attempts.values() for k in kinds if k != "ok")
        ),
        "retries_budget_bound": BUDGET_RATIO * INPUTS + PARALLELISM * BUDGET_RESERVE,
        "retries_budgeted": sum(budgeted_retries(k) for k in attempts.values()),
        "retries_after_empty": sum(k[:-1].count("empty") for k in attempts.values()),
        "outputs_ok": statuses["ok"],
        "slow_replies_read_in_time": sum(o["text"].startswith("late ") for o in run["outputs"]),
        "outputs_error": statuses["error"],
        "error_types": dict(Counter(o["error"]["type"] for o in run["outputs"] if o["error"])),
        "dead_letters": len(run["dead"]),
        "restarts": run["watch"].max_restarts,
        "job_exceptions": len(run["watch"].exceptions),
        "seconds": round(run["seconds"], 1),
    }
    path = Path(run["root"]) / "provider_faults.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"\nprovider faults under load ({path}):\n{json.dumps(result, indent=2)}")
    return result


def test_every_input_ends_with_exactly_one_output_ok_or_error(run: dict[str, Any]) -> None:
    ids = Counter(o["id"] for o in run["outputs"])
    assert sorted(ids) == sorted(f"in-{i}" for i in range(INPUTS))
    assert set(ids.values()) == {1}
    assert {o["status"] for o in run["outputs"]} <= {"ok", "error"}
    for output in run["outputs"]:
        if output["status"] == "ok":
            # A slow reply is late by 1 s; on a busy machine the client may still read it.
            assert output["text"] in (f"answer to {output['id']}", f"late answer to {output['id']}")


def test_error_outputs_name_the_provider_error_class(run: dict[str, Any]) -> None:
    errors = [o for o in run["outputs"] if o["status"] == "error"]
    assert errors, "the fault rates should exhaust some turns' retries"
    for output in errors:
        assert output["error"]["type"] in PROVIDER_ERRORS, output["error"]
        assert output["error"]["message"]
        assert "test-key" not in json.dumps(output)


def test_each_error_output_has_one_run_dead_letter_of_the_same_class(
    run: dict[str, Any],
) -> None:
    errors = {o["id"]: o["error"]["type"] for o in run["outputs"] if o["status"] == "error"}
    dead = Counter(d["id"] for d in run["dead"])
    assert all(d["stage"] == "run" for d in run["dead"])
    assert set(dead.values()) <= {1}
    by_run = {o["run_id"]: o["id"] for o in run["outputs"]}
    assert sorted(by_run.get(d["id"], d["id"]) for d in run["dead"]) == sorted(errors)
    for letter in run["dead"]:
        assert letter["error_type"] == errors[by_run.get(letter["id"], letter["id"])]


def test_the_job_never_restarts(run: dict[str, Any]) -> None:
    watch = run["watch"]
    assert watch.samples > 0, "the REST API was never sampled: the check would be vacuous"
    assert watch.max_restarts == 0
    assert watch.exceptions == []


def test_every_input_reached_the_provider_and_saw_at_most_the_policys_attempts(
    run: dict[str, Any],
) -> None:
    attempts = run["attempts"]
    # On a busy machine an attempt can time out before the stub has read its request: the
    # stub then never sees it. Such a turn can only have ended in a timeout or connection error.
    unseen = [o for o in run["outputs"] if o["id"] not in attempts]
    for output in unseen:
        assert output["status"] == "error"
        assert output["error"]["type"] in {"RequestTimeout", "ConnectionFailed"}, output["error"]
    assert len(unseen) < 0.01 * INPUTS
    assert len(run["requests"]) == sum(len(k) for k in attempts.values())
    most = 1 + MAX_RETRIES + 1  # + the one free retry of an empty reply
    assert max(len(kinds) for kinds in attempts.values()) <= most
    for kinds in attempts.values():
        assert kinds.count("empty") <= 2
        assert budgeted_retries(kinds) <= MAX_RETRIES


def test_retries_stay_within_the_retry_budget(figures: dict[str, Any]) -> None:
    calls = figures["inputs"]  # one model call per turn, each earning the budget its ratio
    # One model, so one budget, per subtask: each starts with its reserve.
    bound = BUDGET_RATIO * calls + PARALLELISM * BUDGET_RESERVE
    assert figures["retries_budgeted"] <= bound
    free = figures["retries_after_empty"]  # the empty reply's one retry is outside the budget
    assert free <= calls
    assert figures["requests_per_turn"] <= 1 + (bound + free) / calls + 1e-4
    assert sum(figures["faults_injected"].values()) > 0.1 * calls
