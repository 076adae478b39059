"""`SpendBudgets` on the in-memory port: a key's and a tenant's rolling windows, charged after
calls and checked before the next, the tenant's share per subtask, the copy a restore
merges, and a deferred run's wait."""

from __future__ import annotations

from typing import Any

from streamagents.operators.agent import RunState
from streamagents.operators.agent.config import Budgets, SpendBudget, TenantSpendBudget, tenant_of
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_state import ModelAction
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.memory_port import InMemoryKeyedPort
from streamagents.operators.engine.rolling_spend import Spent
from streamagents.operators.engine.spend_budgets import Deferral, Refusal, SpendBudgets

T0 = 1_000_000


def run(key: str = "k", attributes: dict[str, Any] | None = None) -> RunState:
    return RunState(
        run_id="run-1",
        input_id="i",
        key=key,
        started_ms=T0,
        messages=[],
        attributes=attributes or {},
        pending=ModelAction(request_event_id="run-1.0002"),
    )


def budgets_on(port: InMemoryKeyedPort, budgets: Budgets, subtasks: int = 1) -> SpendBudgets:
    return SpendBudgets(declare(port).spend, budgets, "key", subtasks)


def test_without_budgets_nothing_is_checked_or_kept() -> None:
    port = InMemoryKeyedPort(now_ms=T0).at("k")
    spend = budgets_on(port, Budgets())
    assert not spend.enabled
    spend.charge(None, Spent(100, 1.0), T0)
    assert port.state_of("k") == {}


def test_a_key_over_its_window_is_refused_until_the_window_has_room() -> None:
    port = InMemoryKeyedPort(now_ms=T0).at("k")
    budget = SpendBudget(tokens=100, window_s=60, on_exceeded="defer")
    spend = budgets_on(port, Budgets(per_key=budget))
    assert spend.refusal(run(), T0) is None
    spend.charge(None, Spent(120, 0.0), T0)  # the call that crosses the limit completes
    refusal = spend.refusal(run(), T0 + 1)
    assert isinstance(refusal, Refusal)
    assert (refusal.budget, refusal.on_exceeded, refusal.limit) == ("per_key.tokens", "defer", 100)
    assert refusal.error.type == "BudgetExceeded"
    assert refusal.room_at_ms >= T0 + 60_000
    assert spend.refusal(run(), refusal.room_at_ms) is None
    port.at("other")
    assert spend.refusal(run("other"), T0 + 1) is None  # another key's window


def test_a_tenant_gets_its_share_per_subtask_across_its_keys() -> None:
    port = InMemoryKeyedPort(now_ms=T0)
    budget = TenantSpendBudget(field="org", cost=1.0, window_s=60)
    spend = budgets_on(port, Budgets(per_tenant=budget), subtasks=4)
    assert spend.subtask_share(budget) == (None, 0.25)
    port.at("a")
    spend.charge("acme", Spent(0, 0.3), T0)
    port.at("b")
    refusal = spend.refusal(run("b", {"org": "acme"}), T0 + 1)
    assert isinstance(refusal, Refusal) and refusal.budget == "per_tenant.cost"
    assert spend.refusal(run("b", {"org": "other"}), T0 + 1) is None


def test_an_input_that_names_no_tenant_is_refused_with_its_reason() -> None:
    port = InMemoryKeyedPort(now_ms=T0).at("k")
    budget = TenantSpendBudget(field="org.id", tokens=10, window_s=60)
    spend = budgets_on(port, Budgets(per_tenant=budget))
    refusal = spend.refusal(run("k", {"org": {"id": 7}}), T0)
    assert isinstance(refusal, ErrorInfo) and refusal.type == "MissingTenant"


def test_a_restored_subtask_rebuilds_a_tenant_window_from_its_keys_copies() -> None:
    port = InMemoryKeyedPort(now_ms=T0).at("a")
    budget = TenantSpendBudget(field="org", tokens=100, window_s=60)
    budgets_on(port, Budgets(per_tenant=budget)).charge("acme", Spent(150, 0.0), T0)
    restored = InMemoryKeyedPort(now_ms=T0, snapshot=port.snapshot())
    spend = budgets_on(restored, Budgets(per_tenant=budget))
    restored.at("b")
    assert spend.refusal(run("b", {"org": "acme"}), T0 + 1) is None  # not seen key a yet
    restored.at("a")
    assert spend.refusal(run("a", {"org": "acme"}), T0 + 1) is not None
    restored.at("b")
    assert spend.refusal(run("b", {"org": "acme"}), T0 + 1) is not None  # the ledger knows


def test_a_deferred_run_s_wait_is_kept_until_it_ends() -> None:
    port = InMemoryKeyedPort(now_ms=T0).at("k")
    spend = budgets_on(port, Budgets(per_key=SpendBudget(tokens=1, window_s=1)))
    assert spend.deferral() is None
    spend.defer(T0, T0 + 500)
    assert spend.deferral() == Deferral(T0, T0 + 500)
    spend.end_deferral()
    assert spend.deferral() is None


def test_the_tenant_is_read_at_a_dotted_field_or_is_the_key() -> None:
    by_field = Budgets(per_tenant=TenantSpendBudget(field="org.id", tokens=1, window_s=1))
    assert tenant_of(by_field, "key", "k", {"org": {"id": "acme"}}) == "acme"
    assert tenant_of(by_field, "key", "k", {"org": {"id": ""}}) is None
    by_key = Budgets(per_tenant=TenantSpendBudget(field="key", tokens=1, window_s=1))
    assert tenant_of(by_key, "key", "k", {}) == "k"
    assert tenant_of(Budgets(), "key", "k", {"org": "acme"}) is None
