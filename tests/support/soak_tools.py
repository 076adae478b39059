"""The soak job's input: a numbered sequence turned into paced input lines of many keys.

Flink's embedded Python imports this module (the test adds it to the job). Input number
`n` belongs to a block of `KEYS_PER_BLOCK` keys that each get `TURNS` inputs, interleaved
(every key's first turn, then every key's second, ...), so a key's turns are a fraction
of a second apart and the key is never seen again: its history is written, read by its
next turns, then only the memory TTL removes it.
"""

from __future__ import annotations

import hashlib
import json
import time

from pyflink.datastream import MapFunction, RuntimeContext

TURNS = 3
KEYS_PER_BLOCK = 10
PADDING_CHARS = 400


def soak_line(n: int) -> str:
    """Input line number `n`: its key, its turn and some hard-to-compress padding; no id, so
    the per-key count of inputs without one is in state too, and must go with the TTL."""
    block, within = divmod(n, TURNS * KEYS_PER_BLOCK)
    turn, slot = divmod(within, KEYS_PER_BLOCK)
    key = f"k{block * KEYS_PER_BLOCK + slot}"
    padding = hashlib.sha256(f"soak-{n}".encode()).hexdigest() * (PADDING_CHARS // 64 + 1)
    text = f"scenario:soak turn{turn} {padding[:PADDING_CHARS]} n{n}"
    return json.dumps({"key": key, "text": text})  # no id: the engine numbers it per key


def key_count(inputs: int) -> int:
    """How many distinct keys the first `inputs` lines use."""
    if inputs <= 0:
        return 0
    block, within = divmod(inputs - 1, TURNS * KEYS_PER_BLOCK)
    return block * KEYS_PER_BLOCK + min(within, KEYS_PER_BLOCK - 1) + 1


class Paced(MapFunction):
    """Emits input line `n` no earlier than `n / rate` seconds after the first one."""

    def __init__(self, rate_per_s: float) -> None:
        self._rate = rate_per_s
        self._start: float | None = None

    def open(self, runtime_context: RuntimeContext) -> None:
        self._start = None

    def map(self, value: int) -> str:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        wait = self._start + value / self._rate - now
        if wait > 0:
            time.sleep(min(wait, 1.0))
        return soak_line(value)
