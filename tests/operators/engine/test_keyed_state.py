"""The engine's keyed state layout: the names and kinds savepoints restore by, declared once."""

from __future__ import annotations

from typing import Any

from streamagents.operators.engine.keyed_port import StateKind
from streamagents.operators.engine.keyed_state import declare
from streamagents.operators.engine.memory_port import InMemoryKeyedPort

SAVEPOINT_CONTRACT = {
    "run": ("value", StateKind.TEXT),
    "queue": ("map", (StateKind.INT, StateKind.TEXT)),
    "queue_head": ("value", StateKind.INT),
    "queue_tail": ("value", StateKind.INT),
    "inputs_without_id": ("value", StateKind.INT),
    "key_runs": ("value", StateKind.INT),
    "history": ("value", StateKind.BYTES),
    "cleanup_at": ("value", StateKind.INT),
    "approvals_settled": ("map", (StateKind.TEXT, StateKind.TEXT)),
    "parked_aside": ("map", (StateKind.TEXT, StateKind.TEXT)),
    "followups": ("map", (StateKind.TEXT, StateKind.TEXT)),
    "spend_key": ("value", StateKind.TEXT),
    "spend_tenant": ("value", StateKind.TEXT),
    "spend_deferred": ("value", StateKind.TEXT),
}
"""Every keyed state engines before this one declared: a savepoint of theirs holds these."""

ADDED_SINCE = {"spend_job": ("value", StateKind.TEXT)}
"""States added since: a savepoint taken before holds none of them, so each starts empty."""


class RecordingPort(InMemoryKeyedPort):
    """An in-memory port that notes each state declared, with its kind."""

    def __init__(self) -> None:
        super().__init__()
        self.declared: dict[str, tuple[str, Any]] = {}

    def value_state(self, name: str, kind: StateKind) -> Any:
        assert name not in self.declared, f"{name} declared twice"
        self.declared[name] = ("value", kind)
        return super().value_state(name, kind)

    def map_state(self, name: str, key_kind: StateKind, value_kind: StateKind) -> Any:
        assert name not in self.declared, f"{name} declared twice"
        self.declared[name] = ("map", (key_kind, value_kind))
        return super().map_state(name, key_kind, value_kind)


def test_every_state_keeps_the_name_and_kind_old_savepoints_hold() -> None:
    port = RecordingPort()
    declare(port)
    assert port.declared == {**SAVEPOINT_CONTRACT, **ADDED_SINCE}


def test_each_part_gets_handles_on_its_own_states() -> None:
    port = InMemoryKeyedPort().at("k")
    state = declare(port)
    state.run.update("r")
    state.queue.lines.put(0, "line")
    state.memory.cleanup_at.update(5)
    state.parked.aside.put("run-1", "{}")
    state.followups.put("f", "{}")
    state.spend.deferred.update("[1, 2]")
    assert port.state_of("k") == {
        "run": "r",
        "queue": {0: "line"},
        "cleanup_at": 5,
        "parked_aside": {"run-1": "{}"},
        "followups": {"f": "{}"},
        "spend_deferred": "[1, 2]",
    }
