"""What a key whose run is parked for an approval does with its new inputs, as plain rules.

With `while_parked: queue` (the default) a key's new inputs wait in its queue behind the
parked run; with `separate_run` a run that parks is set aside (in keyed state, by run id)
and the key's next input starts its own run at once. Either way a key with a parked run
holds at most `max_inputs_per_parked_key` inputs in keyed state, its parked runs and
queued inputs together; `refusal` says why one more is turned away. A run set aside whose
approvals are all settled is ready: it goes on when the key has no other run in progress,
before the key's queued inputs (`next_ready`). The engine (`AgentFunction`) applies these
rules; see docs/approvals.md#while-a-run-is-parked.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamagents.operators.agent.config import WhileParked
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_state import RunState

__all__ = ["goes_aside", "next_ready", "refusal", "run_of_call"]


def run_of_call(call_id: str) -> str:
    """The run id an approval's `call_id` belongs to (it is the id of a run's event)."""
    return call_id.rpartition(".")[0]


def goes_aside(while_parked: WhileParked, state: RunState) -> bool:
    """Whether a run that just parked is set aside so the key's next input runs at once."""
    return while_parked == "separate_run" and state.parked


def refusal(held: int, bound: int, mode: str) -> ErrorInfo | None:
    """Why a key with a parked run cannot take one more input, holding `held` already (its
    parked runs and queued inputs); None when it can."""
    if held < bound:
        return None
    where = "queued behind its parked run" if mode == "queue" else "parked or queued"
    return ErrorInfo(
        type="ParkedKeyFull",
        message=f"the key already holds {held} inputs {where} while a run of it waits for an "
        f"approval (max_inputs_per_parked_key={bound}); decide its pending approvals, or send "
        "this input again later",
    )


def next_ready(states: Iterable[RunState]) -> RunState | None:
    """The set-aside run to go on first: the earliest started of those no longer parked."""
    ready = [s for s in states if not s.parked]
    return min(ready, key=lambda s: (s.started_ms, s.run_id), default=None)
