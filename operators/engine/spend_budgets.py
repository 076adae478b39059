"""Spend budgets over rolling windows, per key, per tenant and for the whole job, checked
before each model call.

The rule: a model call starts only while the spend in every window it is charged to is
under that window's limits; the call that crosses a limit completes (a call's spend is
known only once it answered), and the next call meets the limit. What a run meets then is
its budget's `on_exceeded`: `dead_letter` ends it (an error output and a `BudgetExceeded`
dead letter naming the budget, its window and the spend), `defer` keeps it in keyed state
with no call and no call slot, and a processing-time timer at the time the window has
room wakes it (once the input has ended no such timer can fire: it ends as `dead_letter`).

Where the spend is kept:

- per key: the key's window, in its keyed state (`spend_key`): exact, and restored with it;
- per tenant: a tenant's keys spread over the operator's subtasks, and a subtask sees only
  its own keys' state. Each subtask allows a tenant `1/parallelism` of the budget and keeps
  that tenant's window in a ledger in memory; each time it checks or charges a key of the
  tenant, it writes the tenant's whole window into that key's keyed state (`spend_tenant`).
  After a restore the ledger is empty and is rebuilt by merging
  (`RollingSpend.merge_max`) the copy of each key of the tenant it is about to check or
  charge: exact once the key written last before the checkpoint has been seen, a lower
  bound until then (see docs/quotas-failover-and-spend.md for what this allows);
- for the job: as for one tenant that every key belongs to (`spend_job` in keyed state):
  each subtask allows `1/parallelism` of the budget, so the subtasks together never allow
  more than the budget, whatever keys they hold.

Calls performed again after a restore are charged again when they answer: they were made
twice and are paid twice. Calls made after the last checkpoint and before a failure are
charged in state that the restore rolls back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from streamagents.operators.agent.config import Budgets, SpendBudget, tenant_of
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_endings import budget_error
from streamagents.operators.agent.run_state import RunState
from streamagents.operators.engine.keyed_state import SpendState
from streamagents.operators.engine.rolling_spend import RollingSpend, Spent

__all__ = ["Deferral", "Refusal", "SpendBudgets"]


@dataclass(frozen=True)
class Refusal:
    """A model call a budget does not let start: which budget, and what the run meets."""

    error: ErrorInfo
    on_exceeded: Literal["dead_letter", "defer"]
    room_at_ms: int
    budget: str
    limit: float
    window_s: float


@dataclass(frozen=True)
class Deferral:
    """A run waiting for a window to have room: since when, and until when."""

    since_ms: int
    until_ms: int


class SpendBudgets:
    """The current key's and its tenant's spend windows: checks before calls, charges after."""

    def __init__(self, state: SpendState, budgets: Budgets, key_field: str, subtasks: int) -> None:
        self._budgets = budgets
        self._key_field = key_field
        self._per_key = budgets.per_key
        self._per_tenant = budgets.per_tenant
        self._per_job = budgets.per_job
        self._parallelism = max(1, subtasks)
        self.enabled = any(b is not None for b in (self._per_key, self._per_tenant, self._per_job))
        self._key_spend = state.key_spend
        self._tenant_copy = state.tenant_copy
        self._job_copy = state.job_copy
        self._job: RollingSpend | None = None
        self._deferred = state.deferred
        self._ledger: dict[str, RollingSpend] = {}

    # -- the windows -----------------------------------------------------------------------

    def _key_window(self, budget: SpendBudget) -> RollingSpend:
        stored = self._key_spend.value()
        window_ms = _window_ms(budget)
        if stored is None:
            return RollingSpend(window_ms)
        return RollingSpend.from_json(stored, window_ms)

    def _tenant_window(self, budget: SpendBudget, tenant: str) -> RollingSpend:
        """The ledger's window of `tenant`, merged with the copy the current key holds."""
        window = self._ledger.get(tenant)
        if window is None:
            window = self._ledger[tenant] = RollingSpend(_window_ms(budget))
        stored = self._tenant_copy.value()
        if stored is not None:
            copy = json.loads(stored)
            if copy["tenant"] == tenant:
                window.merge_max(RollingSpend.from_json(copy["window"], window.window_ms))
        return window

    def _job_window(self, budget: SpendBudget) -> RollingSpend:
        """This subtask's window of the job's spend, merged with the current key's copy."""
        if self._job is None:
            self._job = RollingSpend(_window_ms(budget))
        stored = self._job_copy.value()
        if stored is not None:
            self._job.merge_max(RollingSpend.from_json(stored, self._job.window_ms))
        return self._job

    def subtask_share(self, budget: SpendBudget) -> tuple[int | None, float | None]:
        """What one subtask allows a tenant (or the job): the budget's limits over the
        parallelism."""
        p = self._parallelism
        tokens = None if budget.tokens is None else max(1, budget.tokens // p)
        cost = None if budget.cost is None else budget.cost / p
        return tokens, cost

    # -- before a call ---------------------------------------------------------------------

    def refusal(self, state: RunState, now_ms: int) -> Refusal | ErrorInfo | None:
        """Why the run's next model call may not start now (None: it may): a budget's
        refusal, or the error of an input that names no tenant."""
        if self._per_key is not None:
            budget = self._per_key
            window = self._key_window(budget)
            found = _over("per_key", budget, window, budget.tokens, budget.cost, now_ms, "key")
            if found is not None:
                return found
        if self._per_job is not None:
            budget = self._per_job
            window = self._job_window(budget)
            self._keep_job_copy(window, now_ms)
            tokens, cost = self.subtask_share(budget)
            who = f"job (this subtask's 1/{self._parallelism} share)"
            found = _over("per_job", budget, window, tokens, cost, now_ms, who)
            if found is not None:
                return found
        if self._per_tenant is not None:
            budget = self._per_tenant
            tenant = tenant_of(self._budgets, self._key_field, state.key, state.attributes)
            if tenant is None:
                return ErrorInfo(
                    type="MissingTenant",
                    message=f"budgets.per_tenant: the input has no text field "
                    f"{budget.field!r} naming its tenant",
                )
            window = self._tenant_window(budget, tenant)
            self._keep_copy(tenant, window, now_ms)
            tokens, cost = self.subtask_share(budget)
            who = f"tenant {tenant!r} (this subtask's 1/{self._parallelism} share)"
            return _over("per_tenant", budget, window, tokens, cost, now_ms, who)
        return None

    # -- after a call ----------------------------------------------------------------------

    def charge(self, tenant: str | None, spent: Spent, now_ms: int) -> None:
        """Charge what a run of the current key (and of `tenant`) spent since its last step
        to their windows."""
        if not self.enabled or (spent.tokens <= 0 and spent.cost_usd <= 0):
            return
        if self._per_key is not None:
            window = self._key_window(self._per_key)
            window.charge(now_ms, spent.tokens, spent.cost_usd)
            self._key_spend.update(window.to_json(now_ms))
        if self._per_tenant is not None and tenant is not None:
            window = self._tenant_window(self._per_tenant, tenant)
            window.charge(now_ms, spent.tokens, spent.cost_usd)
            self._keep_copy(tenant, window, now_ms)
        if self._per_job is not None:
            window = self._job_window(self._per_job)
            window.charge(now_ms, spent.tokens, spent.cost_usd)
            self._keep_job_copy(window, now_ms)

    def _keep_copy(self, tenant: str, window: RollingSpend, now_ms: int) -> None:
        """Write the tenant's window into the current key's state, for a restore to merge."""
        if window.buckets:
            copy = {"tenant": tenant, "window": window.to_json(now_ms)}
            self._tenant_copy.update(json.dumps(copy))

    def _keep_job_copy(self, window: RollingSpend, now_ms: int) -> None:
        """Write the job's window into the current key's state, for a restore to merge."""
        if window.buckets:
            self._job_copy.update(window.to_json(now_ms))

    # -- runs deferred ---------------------------------------------------------------------

    def defer(self, now_ms: int, until_ms: int) -> None:
        """Note that the current key's run waits until `until_ms`."""
        self._deferred.update(json.dumps([now_ms, until_ms]))

    def deferral(self) -> Deferral | None:
        """The current key's run's wait, if it is deferred."""
        stored = self._deferred.value()
        if stored is None:
            return None
        since, until = json.loads(stored)
        return Deferral(since, until)

    def end_deferral(self) -> None:
        """The current key's run no longer waits."""
        self._deferred.clear()


def _window_ms(budget: SpendBudget) -> int:
    return max(1, round(budget.window_s * 1000))


def _over(
    name: str,
    budget: SpendBudget,
    window: RollingSpend,
    tokens: int | None,
    cost: float | None,
    now_ms: int,
    who: str,
) -> Refusal | None:
    """The refusal of a window whose spend is at or over a limit, if it is."""
    spent = window.total(now_ms)
    if tokens is not None and spent.tokens >= tokens:
        which, limit, amount = "tokens", float(tokens), f"{spent.tokens} tokens"
    elif cost is not None and spent.cost_usd >= cost:
        which, limit, amount = "cost", cost, f"${spent.cost_usd:.6g}"
    else:
        return None
    room_at = window.room_at(now_ms, tokens, cost)
    detail = (
        f"the {who} spent {amount} in the last {budget.window_s:g} s window "
        f"(room again at {room_at} ms since the epoch)"
    )
    return Refusal(
        error=budget_error(f"{name}.{which}", limit, detail),
        on_exceeded=budget.on_exceeded,
        room_at_ms=room_at,
        budget=f"{name}.{which}",
        limit=limit,
        window_s=budget.window_s,
    )
