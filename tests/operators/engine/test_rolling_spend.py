"""The rolling spend window: what it holds at a time, when it has room again, and merging
the copies of it that keys keep."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamagents.operators.engine.rolling_spend import RollingSpend, Spent

charges = st.lists(
    st.tuples(st.integers(0, 600_000), st.integers(0, 1000), st.integers(0, 1000)), max_size=30
)


def window_of(made: list[tuple[int, int, int]], window_ms: int = 60_000) -> RollingSpend:
    window = RollingSpend(window_ms)
    for at, tokens, cents in sorted(made):
        window.charge(at, tokens, cents / 100)
    return window


@given(charges, st.integers(0, 700_000))
def test_a_charge_counts_for_at_least_a_window_and_at_most_a_window_and_a_bucket(
    made: list[tuple[int, int, int]], now: int
) -> None:
    made = [m for m in made if m[0] <= now]  # charges are made as time goes on
    window = window_of(made)
    width = window.width_ms
    surely_in = sum(t for at, t, _ in made if now < at + 60_000)
    maybe_in = sum(t for at, t, _ in made if now < at + 60_000 + width)
    assert surely_in <= window.total(now).tokens <= maybe_in


@given(charges, st.integers(1, 5000), st.integers(0, 700_000))
def test_room_at_is_the_first_time_the_window_is_under_its_limit(
    made: list[tuple[int, int, int]], limit: int, now: int
) -> None:
    window = window_of([m for m in made if m[0] <= now])
    room = window.room_at(now, limit, None)
    assert room >= now
    assert window.total(room).tokens < limit
    if room > now:
        assert window.total(room - 1).tokens >= limit


def test_room_at_weighs_both_limits() -> None:
    window = RollingSpend(60_000)
    window.charge(0, 10, 0.0)
    window.charge(30_000, 0, 5.0)
    assert window.room_at(30_000, 10, None) == 61_000
    assert window.room_at(30_000, 10, 5.0) == 91_000


@given(charges, st.integers(0, 100))
def test_merging_the_copies_of_a_window_gives_the_last_one_written(
    made: list[tuple[int, int, int]], cut: int
) -> None:
    made = sorted(made)
    cut = min(cut, len(made))
    earlier, last = window_of(made[:cut]), window_of(made)
    now = made[-1][0] if made else 0
    merged = RollingSpend(60_000)
    merged.merge_max(RollingSpend.from_json(last.to_json(now), 60_000))
    merged.merge_max(RollingSpend.from_json(earlier.to_json(now), 60_000))
    assert merged.total(now) == last.total(now)


def test_a_window_round_trips_through_its_json() -> None:
    window = RollingSpend(60_000)
    window.charge(1_000, 5, 0.25)
    copy = RollingSpend.from_json(window.to_json(1_000), 60_000)
    assert copy.total(1_000) == Spent(5, 0.25)
