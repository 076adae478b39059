"""The inputs waiting behind their key's run, in arrival order, in keyed state.

Each key's queue is a map from position to input line plus its head and tail positions,
so adding and taking an input touches one entry. The subtask counts its waiting inputs
(`waiting`), which bounds how many may wait before the task thread makes room by settling
a busy key's call (`max_waiting_inputs`) and tells `run` that a held input is answered (the
`waiting_inputs` metric at 0). A queue restored from a checkpoint is counted the first time
its key is touched (a timer, or an input replayed after the restore), each line once.
Inputs without an id get their key's next position among such inputs (`number`), kept in
state so a replay numbers them alike; each run gets its key's next run sequence number
(`next_run`), kept in state the same way.
"""

from __future__ import annotations

from streamagents.operators.agent.records import InputRecord, numbered
from streamagents.operators.engine.keyed_port import KeyContext
from streamagents.operators.engine.keyed_state import QueueState
from streamagents.operators.engine.metrics import EngineMetrics

__all__ = ["InputQueue"]


class InputQueue:
    """Per-key FIFO of input lines, and the subtask's count of waiting inputs."""

    def __init__(
        self, state: QueueState, port: KeyContext, max_waiting: int, metrics: EngineMetrics
    ) -> None:
        self._lines = state.lines
        self._head = state.head
        self._tail = state.tail
        self._unnamed = state.inputs_without_id
        self._runs = state.key_runs
        self._port = port
        self._max_waiting = max_waiting
        self._metrics = metrics
        self.waiting = 0
        """Inputs waiting in this subtask's queues (restored ones once their key is touched)."""
        self._counted: set[str] = set()
        """The keys with waiting lines that are counted in `waiting` (see `_adopt`)."""

    @property
    def full(self) -> bool:
        """Whether the subtask's waiting inputs are at their bound."""
        return self.waiting >= self._max_waiting

    def push(self, raw: str) -> None:
        """Queue an input line behind the current key's run."""
        tail = self._tail.value()
        waiting = 0 if tail is None else tail - (self._head.value() or 0)
        self._adopt(self._port.current_key(), waiting)  # (a restored queue's lines)
        tail = tail or 0
        self._lines.put(tail, raw)
        self._tail.update(tail + 1)
        self._count(1)

    def pop(self) -> str | None:
        """Take the current key's oldest waiting line; None when its queue is empty."""
        tail = self._tail.value()
        if tail is None:
            return None
        head = self._head.value() or 0
        key = self._port.current_key()
        self._adopt(key, tail - head)
        raw = self._lines.get(head)
        self._lines.remove(head)
        self._count(-1)
        if head + 1 >= tail:
            self._head.clear()
            self._tail.clear()
            self._counted.discard(key)
        else:
            self._head.update(head + 1)
        return raw

    def length(self) -> int:
        """How many lines the current key has waiting."""
        tail = self._tail.value()
        return 0 if tail is None else tail - (self._head.value() or 0)

    def has_lines(self) -> bool:
        """Whether the current key has lines waiting."""
        return self._tail.value() is not None

    def count_restored(self) -> None:
        """Count the current key's queue, restored from a checkpoint, as waiting (the
        lines this attempt has already counted are not counted again)."""
        length = self.length()
        if length:
            self._adopt(self._port.current_key(), length)

    def number(self, record: InputRecord) -> InputRecord:
        """Give an input without an id its key's next position (see `records.numbered`).

        Runs start in arrival order, so the count kept in keyed state is the input's
        position among its key's inputs without an id; a restore brings back the count with
        the source offset, so a replay numbers the same lines the same way. Inputs with an
        id touch no state here.
        """
        if record.id_given:
            return record
        position = self._unnamed.value() or 0
        self._unnamed.update(position + 1)
        return numbered(record, position)

    def next_run(self) -> int:
        """The current key's next run sequence number (0, 1, ...): the order of its runs,
        restored with the source offset; it starts again at 0 once the key's memory expires."""
        sequence = self._runs.value() or 0
        self._runs.update(sequence + 1)
        return sequence

    def forget_numbering(self) -> None:
        """Drop the key's counts of inputs without an id and of runs (its memory expired)."""
        self._unnamed.clear()
        self._runs.clear()

    def _adopt(self, key: str, length: int) -> None:
        """Count `key`'s `length` waiting lines unless they are counted: those of a queue
        restored from a checkpoint, the first time this attempt touches it."""
        if key not in self._counted:
            self._counted.add(key)
            self._count(length)

    def _count(self, change: int) -> None:
        self.waiting += change
        self._metrics.waiting_inputs.set(self.waiting)
