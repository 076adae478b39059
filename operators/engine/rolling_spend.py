"""Tokens and dollars spent over a rolling window, in time buckets that can be merged.

A window of `window_ms` keeps its spend in 60 buckets of `window_ms / 60` (at least 1 ms):
a charge goes into the bucket its time falls in and counts until that bucket's end is a
whole window old, so it leaves the window between `window_ms` and `window_ms * 61/60`
after it was made — never early. Two copies of one window merge by taking each bucket's
larger counts (`merge_max`): the counts of a bucket only grow, so the copy written last is
the largest, and the merge of all copies is exact once it is among them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["BUCKETS_PER_WINDOW", "RollingSpend", "Spent"]

BUCKETS_PER_WINDOW = 60
"""How many buckets a window is cut into."""


class Spent(NamedTuple):
    """Tokens and US dollars."""

    tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class RollingSpend:
    """The spend of one key or tenant over a rolling window of `window_ms`."""

    window_ms: int
    buckets: dict[int, Spent] = field(default_factory=dict)

    @property
    def width_ms(self) -> int:
        """The length of one bucket."""
        return max(1, math.ceil(self.window_ms / BUCKETS_PER_WINDOW))

    def _leaves_at(self, start_ms: int) -> int:
        """When the spend of the bucket starting at `start_ms` leaves the window."""
        return start_ms + self.width_ms + self.window_ms

    def charge(self, now_ms: int, tokens: int, cost_usd: float) -> None:
        """Add a spend made at `now_ms`; buckets out of the window are dropped."""
        self._drop_old(now_ms)
        start = now_ms - now_ms % self.width_ms
        had = self.buckets.get(start, Spent())
        self.buckets[start] = Spent(had.tokens + tokens, had.cost_usd + cost_usd)

    def total(self, now_ms: int) -> Spent:
        """The spend still in the window at `now_ms`."""
        kept = [s for start, s in self.buckets.items() if self._leaves_at(start) > now_ms]
        return Spent(sum(s.tokens for s in kept), sum(s.cost_usd for s in kept))

    def room_at(self, now_ms: int, tokens: int | None, cost_usd: float | None) -> int:
        """The earliest time from `now_ms` on when the window's spend is under both limits
        (a limit of None is no limit)."""
        spent = self.total(now_ms)
        for start in sorted(self.buckets):
            if _under(spent, tokens, cost_usd):
                return now_ms
            leaves = self._leaves_at(start)
            if leaves > now_ms:
                gone = self.buckets[start]
                spent = Spent(spent.tokens - gone.tokens, spent.cost_usd - gone.cost_usd)
                now_ms = leaves
        return now_ms

    def merge_max(self, other: RollingSpend) -> None:
        """Take each bucket's larger counts from another copy of this window."""
        for start, theirs in other.buckets.items():
            mine = self.buckets.get(start, Spent())
            self.buckets[start] = Spent(
                max(mine.tokens, theirs.tokens), max(mine.cost_usd, theirs.cost_usd)
            )

    def _drop_old(self, now_ms: int) -> None:
        for start in [s for s in self.buckets if self._leaves_at(s) <= now_ms]:
            del self.buckets[start]

    def to_json(self, now_ms: int) -> str:
        """The buckets still in the window at `now_ms`, as JSON."""
        self._drop_old(now_ms)
        rows = [[start, s.tokens, s.cost_usd] for start, s in sorted(self.buckets.items())]
        return json.dumps({"window_ms": self.window_ms, "buckets": rows})

    @classmethod
    def from_json(cls, text: str, window_ms: int) -> RollingSpend:
        """A window read back from `to_json`, for a window of `window_ms` (the buckets of
        a copy written with another window length are kept as they are)."""
        rows = json.loads(text)["buckets"]
        return cls(window_ms, {int(r[0]): Spent(int(r[1]), float(r[2])) for r in rows})


def _under(spent: Spent, tokens: int | None, cost_usd: float | None) -> bool:
    """Whether `spent` is under both limits."""
    return (tokens is None or spent.tokens < tokens) and (
        cost_usd is None or spent.cost_usd < cost_usd
    )
