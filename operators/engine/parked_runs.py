"""Runs waiting for a person's decision: parked, set aside, settled approvals, room per key.

A parked run stays in keyed state with a processing-time timer at its earliest approval
deadline, and no call on the runner (no slot, no thread). With `while_parked:
separate_run` a parked run is set aside in the key's `parked_aside` map (by run id) so the
key's next input runs at once; a set-aside run whose approvals are settled goes on when
the key has no run in progress. A key with a parked run holds at most
`max_inputs_per_parked_key` inputs (see `parked_keys.refusal`). How each approval was
settled is remembered (the key's latest `MAX_SETTLED_PER_KEY`) to tell a duplicate
decision from a stale one. See docs/approvals.md.
"""

from __future__ import annotations

from streamagents.operators.agent import RunState
from streamagents.operators.agent.approvals import forgotten, settled_entry, settled_fingerprint
from streamagents.operators.agent.config import WhileParked
from streamagents.operators.agent.emitted_records import DeadLetter
from streamagents.operators.agent.parked_keys import goes_aside, next_ready, refusal
from streamagents.operators.engine.keyed_port import KeyContext
from streamagents.operators.engine.keyed_state import ParkedState

__all__ = ["MAX_SETTLED_PER_KEY", "ParkedRuns"]

MAX_SETTLED_PER_KEY = 256
"""Settled approvals a key remembers (to tell a duplicate decision from a stale one)."""


class ParkedRuns:
    """The current key's parked and set-aside runs and its settled approvals."""

    def __init__(
        self, state: ParkedState, port: KeyContext, while_parked: WhileParked, max_inputs: int
    ) -> None:
        self._port = port
        self._while_parked = while_parked
        self._max_inputs = max_inputs
        self._settled = state.settled
        self._aside = state.aside
        self.separate = while_parked == "separate_run"
        """Whether a parked run is set aside so the key's next input runs at once."""

    def park(self, state: RunState) -> None:
        """Arm the timer of a parked run's earliest approval deadline."""
        due = state.next_deadline_ms
        if due is not None:
            self._port.register_processing_timer(due)

    def goes_aside(self, state: RunState) -> bool:
        """Whether a run that just parked is set aside."""
        return goes_aside(self._while_parked, state)

    def set_aside(self, state: RunState) -> None:
        """Keep a run in the key's `parked_aside` map, with its deadline timer."""
        self._aside.put(state.run_id, state.model_dump_json())
        self.park(state)

    def aside(self, run_id: str) -> str | None:
        """A set-aside run's stored state, by run id."""
        return self._aside.get(run_id)

    def take_aside(self, run_id: str) -> None:
        """The run is no longer set aside."""
        self._aside.remove(run_id)

    def has_aside(self) -> bool:
        """Whether the key has runs set aside."""
        return not self._aside.is_empty()

    def aside_runs(self) -> list[tuple[str, RunState]]:
        """The key's set-aside runs by run id."""
        return [(i, RunState.model_validate_json(v)) for i, v in list(self._aside.items())]

    def ready(self) -> RunState | None:
        """The set-aside run to go on first (settled, earliest started), if any."""
        if self._aside.is_empty():
            return None
        return next_ready(RunState.model_validate_json(v) for v in self._aside.values())

    def refusal_letter(self, raw: str, stored_run: str | None, queued: int) -> DeadLetter | None:
        """The dead letter of an input the key, having a parked run and `queued` waiting
        inputs, holds no more room for; None when it has room or no parked run."""
        parked = len(list(self._aside.keys())) if self.separate else 0
        if stored_run is not None and RunState.model_validate_json(stored_run).parked:
            parked += 1
        if not parked:
            return None
        error = refusal(parked + queued, self._max_inputs, self._while_parked)
        if error is None:
            return None
        return DeadLetter.build("queue", error, raw, key=self._port.current_key())

    def settled(self, call_id: str) -> str | None:
        """The fingerprint of how the key settled `call_id`, if it remembers."""
        kept = self._settled.get(call_id)
        return None if kept is None else settled_fingerprint(kept)

    def remember(self, settled: dict[str, str], now_ms: int) -> None:
        """Keep how approvals were settled, the key's latest `MAX_SETTLED_PER_KEY` of them."""
        if not settled:
            return
        for call_id, fingerprint in settled.items():
            self._settled.put(call_id, settled_entry(fingerprint, now_ms))
        for call_id in forgotten(self._settled.items(), MAX_SETTLED_PER_KEY):
            self._settled.remove(call_id)
