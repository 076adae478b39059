"""The agent function's open() exempts long-lived objects from full collections, and a
restart's open() releases what the earlier attempt froze."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streamagents.operators.flink._frozen_heap import freeze_long_lived


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
