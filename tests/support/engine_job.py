"""Drives a job of several agent operator subtasks without Flink, one `EngineHarness` each.

`EngineJob` plays what Flink does around parallel subtasks: it routes each input line to
the subtask that owns its key, moves every subtask's clock together, checkpoints all of
them at once (`checkpoint`), and fails over to a new attempt restored from such a
checkpoint (`restore`), optionally with the keys' ownership changed (a rescale: each key's
state and timers move to the snapshot of its new owner). The source replays the lines sent
since the checkpoint, each to its key's owner in the new attempt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine_harness import Checkpoint, EngineHarness

from streamagents.operators.agent.approvals import ApprovalDecision, decision_line
from streamagents.operators.engine import PortSnapshot


@dataclass
class JobCheckpoint:
    """A checkpoint of every subtask, the job's source offset, and who owned which key."""

    parts: tuple[Checkpoint, ...]
    lines_sent: int
    owner: dict[str, int]


def rehome(snapshots: Sequence[PortSnapshot], owner: Mapping[str, int]) -> list[PortSnapshot]:
    """The subtasks' snapshots with each key's state and timers in the snapshot of its owner
    under `owner` (as a restore with another key assignment redistributes key groups)."""
    moved = [PortSnapshot() for _ in snapshots]
    for snapshot in snapshots:
        for (name, key), value in snapshot.values.items():
            moved[owner[key]].values[(name, key)] = value
        for (name, key), entries in snapshot.maps.items():
            moved[owner[key]].maps[(name, key)] = entries
        for timer in snapshot.timers:
            moved[owner[timer.key]].timers.add(timer)
    return moved


class EngineJob:
    """Parallel subtasks of one agent operator, each key owned by one of them."""

    def __init__(self, subtasks: Sequence[EngineHarness], owner: Mapping[str, int]) -> None:
        self.subtasks = list(subtasks)
        self.owner = dict(owner)
        self.sent: list[tuple[str, str]] = []
        """Every line the job's source sent, in order (since the restores' replays)."""

    def of(self, key: str) -> EngineHarness:
        """The subtask that owns `key`."""
        return self.subtasks[self.owner[key]]

    def send(self, key: str, line: str) -> None:
        """An input line of `key` arrives at its subtask."""
        self.sent.append((key, line))
        self.of(key).send(key, line)

    def send_input(self, key: str, input_id: str, text: str, **fields: str) -> None:
        """An input record of `key` (with extra `fields`) arrives."""
        self.send(key, json.dumps({"id": input_id, "key": key, "text": text, **fields}))

    def decide(self, key: str, call_id: str, verdict: str) -> None:
        """A person's decision on `call_id` arrives at the subtask of `key`."""
        self.send(key, decision_line(ApprovalDecision(call_id=call_id, decision=verdict), key))

    def advance(self, ms: int) -> None:
        """Let `ms` of processing time pass on every subtask."""
        for subtask in self.subtasks:
            subtask.advance(ms)

    def checkpoint(self) -> JobCheckpoint:
        """Take a checkpoint of every subtask between two callbacks."""
        parts = tuple(subtask.checkpoint() for subtask in self.subtasks)
        return JobCheckpoint(parts, len(self.sent), dict(self.owner))

    def restore(self, checkpoint: JobCheckpoint, owner: Mapping[str, int] | None = None) -> None:
        """Every subtask fails and a new attempt starts from `checkpoint`, its keys owned as
        `owner` says (as at the checkpoint when None); the source replays the lines sent
        since, each to its key's new owner."""
        self.owner = dict(checkpoint.owner if owner is None else owner)
        states = rehome([part.state for part in checkpoint.parts], self.owner)
        replay = self.sent[checkpoint.lines_sent :]
        del self.sent[checkpoint.lines_sent :]
        for subtask, part, state in zip(self.subtasks, checkpoint.parts, states, strict=True):
            del subtask.sent[part.lines_sent :]  # the job replays them, to their new owners
            subtask.restore(Checkpoint(state, part.lines_sent, part.emitted))
        for key, line in replay:
            self.send(key, line)

    def end_input(self) -> None:
        """The bounded input ends on every subtask."""
        for subtask in self.subtasks:
            subtask.end_input()

    def records(self, channel: str) -> list[dict[str, object]]:
        """The records every subtask emitted on `channel`, subtask by subtask."""
        return [record for subtask in self.subtasks for record in subtask.records(channel)]


__all__ = ["EngineJob", "JobCheckpoint", "rehome"]
