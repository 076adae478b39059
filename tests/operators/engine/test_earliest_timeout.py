"""The earliest timeout base among live calls, kept without scanning them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamagents.operators.engine.earliest_timeout import EarliestTimeout

_actions = st.lists(
    st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 9), st.integers(0, 50)),
    max_size=300,
)


@given(actions=_actions)
def test_it_always_equals_the_minimum_over_the_live_calls(
    actions: list[tuple[str, int, int]],
) -> None:
    live: dict[str, object] = {}
    bases: dict[str, int] = {}
    earliest = EarliestTimeout(live)
    for action, key_number, base in actions:
        key = f"k{key_number}"
        if action == "add":  # a key's next call replaces its last one
            call = object()
            live[key] = call
            bases[key] = base
            earliest.add(key, call, base)
        else:
            live.pop(key, None)
        expected = min((bases[k] for k in live), default=None)
        assert earliest.earliest_ms() == expected


def test_its_heap_stays_within_a_multiple_of_the_live_calls() -> None:
    live: dict[str, object] = {}
    earliest = EarliestTimeout(live)
    live["slow"] = slow = object()
    earliest.add("slow", slow, 0)  # stays live and at the top: nothing is popped
    for number in range(10_000):
        call = object()
        live["fast"] = call
        earliest.add("fast", call, 1 + number)
        del live["fast"]
    assert len(earliest._heap) <= 4 * len(live) + 65
    assert earliest.earliest_ms() == 0
