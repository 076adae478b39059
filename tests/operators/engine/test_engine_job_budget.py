"""The job-wide spend cap (`budgets.per_job`) on the engine, through the in-memory port: it
counts every key and tenant together, each subtask allows its share, and a restore
rebuilds it from the keys' copies."""

from __future__ import annotations

import json
from pathlib import Path

from engine_harness import EngineHarness, harness

from streamagents.connectors.providers.prices import ModelPrices
from streamagents.operators.agent.config import Budgets, ModelSpec, SpendBudget
from streamagents.testing import EchoTestModel

# EchoTestModel answers each call with 3 input and 2 output tokens: at these prices a call
# costs $3 + $2 = $5.
PRICED = ModelSpec(
    provider="test",
    model="engine-harness",
    prices=ModelPrices(input_per_million=1_000_000, output_per_million=1_000_000),
)
CAP = Budgets(per_job=SpendBudget(cost=10.0, window_s=60.0))


def send(h: EngineHarness, key: str, input_id: str, tenant: str) -> None:
    h.send(key, json.dumps({"id": input_id, "key": key, "text": "hi", "tenant": tenant}))
    h.settle_all()


def answered(h: EngineHarness) -> list[str]:
    return [o["id"] for o in h.outputs() if o["status"] == "ok"]


def test_the_job_cap_counts_every_key_and_tenant_together(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=CAP)
    send(h, "a", "in-a", "acme")
    send(h, "b", "in-b", "globex")  # $10 spent, over two keys and two tenants
    send(h, "c", "in-c", "initech")
    assert answered(h) == ["in-a", "in-b"]
    (letter,) = h.dead_letters()
    assert (letter["id"], letter["error_type"]) == ("in-c", "BudgetExceeded")
    assert "per_job.cost=10" in letter["reason"]
    assert (
        "the job (this subtask's 1/1 share) spent $10 in the last 60 s window" in (letter["reason"])
    )


def test_each_subtask_allows_its_share_of_the_job_cap(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), parallelism=2, spec=PRICED, budgets=CAP)
    send(h, "a", "in-a", "acme")  # $5: this subtask's half of $10
    send(h, "b", "in-b", "acme")
    assert answered(h) == ["in-a"]
    assert "per_job.cost=5" in h.dead_letters()[0]["reason"]


def test_a_restore_rebuilds_the_job_window_from_the_keys_copies(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=CAP)
    send(h, "a", "in-a", "acme")
    send(h, "b", "in-b", "acme")
    h.restore(h.checkpoint())  # the new attempt's window starts empty
    send(h, "b", "in-b2", "acme")  # key b's copy holds the whole $10
    assert answered(h) == ["in-a", "in-b"]
    assert h.dead_letters()[0]["id"] == "in-b2"
