"""The agent function's open() has long-lived objects exempted from full collections soon
after, and a restart's open() releases what the earlier attempt froze."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streamagents.operators.flink._frozen_heap import freeze_long_lived, freeze_soon


class _Node:
    """An object in a reference cycle: only the cyclic collector can free it."""

    def __init__(self) -> None:
        self.self = self


@pytest.fixture(autouse=True)
def _unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the suite runs with an ordinary heap


def test_objects_alive_at_open_are_left_out_of_collections() -> None:
    kept = _Node()
    freeze_long_lived()
    assert gc.get_freeze_count() > 0
    tracked = {id(found) for found in gc.get_objects()}
    assert id(kept) not in tracked
    fresh = _Node()
    assert id(fresh) in {id(found) for found in gc.get_objects()}


def test_a_cycle_frozen_by_an_earlier_open_is_collected_by_the_next() -> None:
    node = _Node()
    dead = weakref.ref(node)
    freeze_long_lived()  # the first attempt's open(): node is alive, so frozen
    del node
    gc.collect()
    assert dead() is not None  # the attempt died without close(): its cycle stays frozen
    freeze_long_lived()  # the restarted attempt's open()
    assert dead() is None


def test_the_opens_of_a_few_seconds_share_one_freeze_made_after_them() -> None:
    gc.unfreeze()
    first = freeze_soon(0.3)  # a subtask's open()
    assert freeze_soon(0.3) is first  # its sibling's, a moment later
    assert gc.get_freeze_count() == 0  # the opens do not wait for it
    kept = _Node()  # made by the second open, before the freeze runs
    first.join(timeout=10)
    assert gc.get_freeze_count() > 0
    assert id(kept) not in {id(found) for found in gc.get_objects()}
    later = freeze_soon(0.3)  # a later open (a restart) gets a freeze of its own
    later.cancel()  # (not in this test process)
    assert later is not first
