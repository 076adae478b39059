"""Spend budgets on the engine, through the in-memory port: per-key and per-tenant rolling
windows, what a run meets over them (dead letter, or a deferral that holds no call slot),
and what a checkpoint and restore keep of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine_harness import T0, EngineHarness, harness

from streamagents.connectors.providers.prices import ModelPrices
from streamagents.operators.agent.config import Budgets, ModelSpec, SpendBudget, TenantSpendBudget
from streamagents.testing import EchoTestModel

# EchoTestModel answers each call with 3 input and 2 output tokens: at these prices a call
# costs $3 + $2 = $5, so the figures below are whole dollars.
PRICED = ModelSpec(
    provider="test",
    model="engine-harness",
    prices=ModelPrices(input_per_million=1_000_000, output_per_million=1_000_000),
)
WINDOW_S = 60.0
WINDOW_MS = 61_000  # a charge leaves the window a whole window after its bucket's end


def per_key(on_exceeded: str = "dead_letter", **limits: Any) -> Budgets:
    limits.setdefault("window_s", WINDOW_S)
    return Budgets(per_key=SpendBudget(on_exceeded=on_exceeded, **limits))  # type: ignore[arg-type]


def per_tenant(on_exceeded: str = "dead_letter", **limits: Any) -> Budgets:
    limits.setdefault("window_s", WINDOW_S)
    return Budgets(
        per_tenant=TenantSpendBudget(field="tenant", on_exceeded=on_exceeded, **limits)  # type: ignore[arg-type]
    )


def send(h: EngineHarness, key: str, input_id: str, tenant: str | None = None) -> None:
    line: dict[str, Any] = {"id": input_id, "key": key, "text": "hi"}
    if tenant is not None:
        line["tenant"] = tenant
    h.send(key, json.dumps(line))


def answered(h: EngineHarness) -> list[str]:
    return [o["id"] for o in h.outputs() if o["status"] == "ok"]


def test_outputs_carry_each_calls_cost_and_the_runs_total(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED)
    h.send_input("k", "in-1", "tool:lookup A1")  # two model calls: the tool's, then the answer
    h.settle_all()
    (output,) = h.outputs()
    assert output["call_costs_usd"] == [5.0, 5.0]
    assert output["cost_usd"] == 10.0
    assert h.count("cost_microusd") == 10_000_000


def test_a_key_over_its_window_gets_a_dead_letter_naming_budget_window_and_spend(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key(tokens=5))
    send(h, "k", "in-1")
    h.settle_all()
    send(h, "k", "in-2")  # the window holds 5 tokens: its call may not start
    h.settle_all()
    (letter,) = h.dead_letters()
    assert (letter["id"], letter["error_type"]) == ("in-2", "BudgetExceeded")
    assert "per_key.tokens=5" in letter["reason"]
    assert "spent 5 tokens in the last 60 s window" in letter["reason"]
    assert json.loads(letter["input"])["id"] == "in-2"  # the input, to send again
    assert h.runner.submitted == 1
    error = next(o for o in h.outputs() if o["id"] == "in-2")["error"]
    assert (error["budget"], error["limit"]) == ("per_key.tokens", 5)


def test_the_key_window_rolls_so_spend_older_than_the_window_frees_room(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key(cost=5.0))
    send(h, "k", "in-1")
    h.settle_all()  # $5 spent at about T0
    h.advance(WINDOW_MS - 5_000)
    send(h, "k", "in-2")  # still inside the window
    h.advance(5_000)  # now a whole window after in-1's charge
    send(h, "k", "in-3")
    h.settle_all()
    assert answered(h) == ["in-1", "in-3"]
    assert [d["id"] for d in h.dead_letters()] == ["in-2"]


def test_another_key_has_its_own_window(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key(tokens=5))
    send(h, "a", "in-a1")
    h.settle_all()
    send(h, "b", "in-b1")
    send(h, "a", "in-a2")
    h.settle_all()
    assert sorted(answered(h)) == ["in-a1", "in-b1"]
    assert [d["id"] for d in h.dead_letters()] == ["in-a2"]


def test_the_call_that_crosses_the_budget_completes_and_the_next_call_meets_it(
    tmp_path: Path,
) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model, spec=PRICED, budgets=per_key(tokens=3))
    h.send_input("k", "in-1", "tool:lookup A1")  # first call: 5 tokens, over 3 at once
    h.settle_all()
    (output,) = h.outputs()
    assert output["status"] == "error" and output["call_costs_usd"] == [5.0]
    assert output["error"]["budget"] == "per_key.tokens"  # its second call did not start
    assert model.requests == 1


def test_a_deferred_run_waits_holding_no_call_slot_and_wakes_when_the_window_has_room(
    tmp_path: Path,
) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model, spec=PRICED, max_in_flight=1, budgets=per_key("defer", tokens=5))
    send(h, "k", "in-1")
    h.settle_all()
    charged_at = h.port.now_ms()
    send(h, "k", "in-2")
    assert h.runner.in_flight == 0 and h.count("runs_deferred") == 1  # no call, no slot
    send(h, "other", "in-o")  # the only slot is free for another key's run
    assert [c.key for c in h.runner.pending] == ["other"]
    h.settle_all()
    assert answered(h) == ["in-1", "in-o"]
    room_at = charged_at - charged_at % 1000 + WINDOW_MS  # the charge's bucket end + window
    h.advance(room_at - 1 - h.port.now_ms())
    assert model.requests == 2  # not yet
    h.advance(1)
    assert [c.key for c in h.runner.pending] == ["k"]
    h.settle_all()
    assert answered(h) == ["in-1", "in-o", "in-2"]
    assert h.dead_letters() == []


def test_inputs_behind_a_deferred_run_keep_their_order(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key("defer", tokens=5))
    for n in range(3):
        send(h, "k", f"in-{n}")
    for _ in range(3):
        h.settle_all()
        h.advance(WINDOW_MS)
    assert answered(h) == ["in-0", "in-1", "in-2"]


def test_the_time_a_run_waits_deferred_does_not_count_against_its_timeout(
    tmp_path: Path,
) -> None:
    budgets = Budgets(
        run_timeout_s=10, per_key=SpendBudget(tokens=5, window_s=WINDOW_S, on_exceeded="defer")
    )
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=budgets)
    send(h, "k", "in-1")
    h.settle_all()
    send(h, "k", "in-2")  # waits about a minute: six times its run timeout
    h.advance(WINDOW_MS)
    h.settle_all()
    assert answered(h) == ["in-1", "in-2"]


def test_a_run_deferred_when_the_input_ends_becomes_a_dead_letter(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key("defer", tokens=5))
    send(h, "k", "in-1")
    h.settle_all()
    send(h, "k", "in-2")
    h.end_input()  # no processing-time timer fires any more: waiting would lose it
    (letter,) = h.dead_letters()
    assert (letter["id"], letter["error_type"]) == ("in-2", "BudgetExceeded")


def test_a_tenant_over_budget_is_refused_on_every_key_while_another_tenant_continues(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_tenant(cost=10.0))
    send(h, "a", "in-a", tenant="acme")
    send(h, "b", "in-b", tenant="acme")
    h.settle_all()  # acme has spent $10 over two keys
    send(h, "c", "in-c", tenant="acme")  # a third key of acme
    send(h, "d", "in-d", tenant="globex")
    h.settle_all()
    assert sorted(answered(h)) == ["in-a", "in-b", "in-d"]
    (letter,) = h.dead_letters()
    assert letter["id"] == "in-c"
    assert "per_tenant.cost=10" in letter["reason"] and "tenant 'acme'" in letter["reason"]


def test_each_subtask_allows_a_tenant_its_share_of_the_budget(tmp_path: Path) -> None:
    h = harness(
        tmp_path, EchoTestModel(), parallelism=2, spec=PRICED, budgets=per_tenant(cost=10.0)
    )
    send(h, "a", "in-a", tenant="acme")
    h.settle_all()  # $5: this subtask's half of $10
    send(h, "b", "in-b", tenant="acme")
    h.settle_all()
    assert answered(h) == ["in-a"]
    assert "per_tenant.cost=5" in h.dead_letters()[0]["reason"]


def test_the_tenant_field_may_be_the_key_field(tmp_path: Path) -> None:
    budgets = Budgets(per_tenant=TenantSpendBudget(field="key", tokens=5, window_s=WINDOW_S))
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=budgets)
    send(h, "acme", "in-1")
    send(h, "globex", "in-2")
    h.settle_all()
    send(h, "acme", "in-3")
    h.settle_all()
    assert sorted(answered(h)) == ["in-1", "in-2"]


def test_an_input_naming_no_tenant_gets_a_dead_letter_saying_so(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_tenant(tokens=5))
    send(h, "a", "in-1")
    h.settle_all()
    (letter,) = h.dead_letters()
    assert letter["error_type"] == "MissingTenant" and "'tenant'" in letter["reason"]
    assert h.runner.submitted == 0


def test_a_restore_keeps_the_key_window(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key(tokens=5))
    send(h, "k", "in-1")
    h.settle_all()
    h.restore(h.checkpoint())
    send(h, "k", "in-2")
    h.settle_all()
    assert [d["id"] for d in h.dead_letters()] == ["in-2"]


def test_a_restore_rebuilds_the_tenant_ledger_from_the_keys_copies(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_tenant(cost=10.0))
    send(h, "a", "in-a", tenant="acme")
    h.settle_all()
    send(h, "b", "in-b", tenant="acme")
    h.settle_all()  # b charged last: its copy holds acme's whole $10
    h.restore(h.checkpoint())  # the new attempt's ledger starts empty
    send(h, "b", "in-b2", tenant="acme")
    send(h, "c", "in-c", tenant="acme")  # a key that never spent: refused all the same
    send(h, "d", "in-d", tenant="globex")
    h.settle_all()
    assert sorted(answered(h)) == ["in-a", "in-b", "in-d"]
    assert sorted(d["id"] for d in h.dead_letters()) == ["in-b2", "in-c"]


def test_a_deferred_run_survives_a_restore_and_wakes_at_its_time(tmp_path: Path) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_key("defer", tokens=5))
    send(h, "k", "in-1")
    h.settle_all()
    send(h, "k", "in-2")
    h.restore(h.checkpoint())
    assert h.runner.in_flight == 0
    h.advance(WINDOW_MS)
    h.settle_all()
    assert answered(h) == ["in-1", "in-2"]


def test_a_call_made_again_after_a_restore_is_charged_again(tmp_path: Path) -> None:
    model = EchoTestModel()
    h = harness(tmp_path, model, spec=PRICED, budgets=per_key(tokens=10))
    send(h, "k", "in-1")
    checkpoint = h.checkpoint()  # in-1's call is in flight
    h.settle_all()
    h.restore(checkpoint)  # its answer was not committed: the call is made again
    h.settle_all()
    assert model.requests == 2 and h.count("calls_reissued") == 1
    send(h, "k", "in-2")  # the window holds the re-issued call's 5 tokens
    h.settle_all()
    send(h, "k", "in-3")  # and in-2's: 10, at the budget
    h.settle_all()
    assert answered(h) == ["in-1", "in-2"]
    assert [d["id"] for d in h.dead_letters()] == ["in-3"]
    assert h.port.now_ms() - T0 < WINDOW_MS  # all within one window


def test_a_key_only_ever_refused_still_knows_its_tenants_spend_after_a_restore(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, EchoTestModel(), spec=PRICED, budgets=per_tenant(cost=5.0))
    send(h, "a", "in-a", tenant="acme")
    h.settle_all()
    send(h, "c", "in-c1", tenant="acme")  # refused: c never spends, but keeps acme's window
    h.settle_all()
    h.restore(h.checkpoint())
    send(h, "c", "in-c2", tenant="acme")  # the first acme key the new attempt sees
    h.settle_all()
    assert answered(h) == ["in-a"]
    assert [d["id"] for d in h.dead_letters()] == ["in-c1", "in-c2"]
