"""Every keyed state the engine keeps, and every timer it sets: the savepoint contract.

A savepoint restores keyed state by name and kind, so the names and kinds below are a
contract with every savepoint ever taken: a new state gets a new name, and none of these
changes. `declare` declares them all through the port once, when the engine is built, and
hands each part only its own handles (`EngineState`).

| state                | kind             | part            | holds                            |
|----------------------|------------------|-----------------|----------------------------------|
| `run`                | text             | engine          | the key's run between its steps  |
| `queue`              | map int -> text  | `InputQueue`    | waiting input lines by position  |
| `queue_head`         | int              | `InputQueue`    | the oldest waiting position      |
| `queue_tail`         | int              | `InputQueue`    | the next free position           |
| `inputs_without_id`  | int              | `InputQueue`    | inputs numbered for lack of an id|
| `key_runs`           | int              | `InputQueue`    | the key's next run sequence      |
| `history`            | bytes            | `KeyMemory`     | the key's short-term history     |
| `cleanup_at`         | int              | `KeyMemory`     | the history's expiry timer       |
| `approvals_settled`  | map text -> text | `ParkedRuns`    | how approvals were settled       |
| `parked_aside`       | map text -> text | `ParkedRuns`    | runs set aside, by run id        |
| `followups`          | map text -> text | `FollowupTimers`| follow-ups waiting, by id        |
| `spend_key`          | text             | `SpendBudgets`  | the key's spend window           |
| `spend_tenant`       | text             | `SpendBudgets`  | a copy of its tenant's window    |
| `spend_job`          | text             | `SpendBudgets`  | a copy of the job's window       |
| `spend_deferred`     | text             | `SpendBudgets`  | a deferred run's wait            |

The timers (Flink checkpoints them with the state; a timer is its key, domain and time):

- processing time: a call's next look (`RunDriver.arm`) or a look for a free slot
  (`RunDriver.look_for_slot`); the history's expiry (`KeyMemory.arm_cleanup`); a
  follow-up's due time (`FollowupTimers.keep`); a parked run's earliest approval deadline
  (`ParkedRuns.park`); the time a spend window has room for a deferred run (engine);
- event time: the end-of-input hold at `FAR_FUTURE_MS` and the drain's looks above it
  (`InputEnd`), which fire only once the input has ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamagents.operators.engine.keyed_port import KeyedPort, MapState, StateKind, ValueState

__all__ = [
    "EngineState",
    "MemoryState",
    "ParkedState",
    "QueueState",
    "SpendState",
    "declare",
]


@dataclass(frozen=True)
class QueueState:
    """The key's waiting inputs and its numbering of inputs and runs (`InputQueue`)."""

    lines: MapState
    head: ValueState
    tail: ValueState
    inputs_without_id: ValueState
    key_runs: ValueState


@dataclass(frozen=True)
class MemoryState:
    """The key's history and its expiry (`KeyMemory`)."""

    history: ValueState
    cleanup_at: ValueState


@dataclass(frozen=True)
class ParkedState:
    """The key's settled approvals and its runs set aside (`ParkedRuns`)."""

    settled: MapState
    aside: MapState


@dataclass(frozen=True)
class SpendState:
    """The key's spend window, its copies of its tenant's and the job's, and a deferred
    run's wait (`SpendBudgets`)."""

    key_spend: ValueState
    tenant_copy: ValueState
    job_copy: ValueState
    deferred: ValueState


@dataclass(frozen=True)
class EngineState:
    """The handles of every keyed state, grouped by the part that owns them."""

    run: ValueState
    queue: QueueState
    memory: MemoryState
    parked: ParkedState
    followups: MapState
    spend: SpendState


def declare(port: KeyedPort) -> EngineState:
    """Declare every keyed state of the engine through `port` (see the table above)."""
    text, integer = StateKind.TEXT, StateKind.INT
    return EngineState(
        run=port.value_state("run", text),
        queue=QueueState(
            lines=port.map_state("queue", integer, text),
            head=port.value_state("queue_head", integer),
            tail=port.value_state("queue_tail", integer),
            inputs_without_id=port.value_state("inputs_without_id", integer),
            key_runs=port.value_state("key_runs", integer),
        ),
        memory=MemoryState(
            history=port.value_state("history", StateKind.BYTES),
            cleanup_at=port.value_state("cleanup_at", integer),
        ),
        parked=ParkedState(
            settled=port.map_state("approvals_settled", text, text),
            aside=port.map_state("parked_aside", text, text),
        ),
        followups=port.map_state("followups", text, text),
        spend=SpendState(
            key_spend=port.value_state("spend_key", text),
            tenant_copy=port.value_state("spend_tenant", text),
            job_copy=port.value_state("spend_job", text),
            deferred=port.value_state("spend_deferred", text),
        ),
    )
