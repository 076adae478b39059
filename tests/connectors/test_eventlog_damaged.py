"""A damaged event log file is reported and skipped; every other file is still read."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamagents.connectors.eventlog import (
    DamagedFile,
    DamagedFileWarning,
    EventLogWriter,
    read_events,
)
from streamagents.serde.events import new_event
from streamagents.serde.messages import ChatMessage


def _write(folder: Path, prefix: str, count: int = 5) -> Path:
    ids = {"job_id": "job", "key": prefix, "run_id": f"run-{prefix}"}
    with EventLogWriter(folder, prefix=prefix, codec="deflate") as writer:
        for n in range(count):
            writer.write(
                new_event("input", sequence=n, messages=[ChatMessage.user(f"hi {n}")], **ids)
            )
            writer.flush()  # one block per event: damage can fall between blocks too
    (path,) = writer.finished
    return path


_KEYS = ("a-first-file", "b-middle-file", "c-last-file")  # no few flipped bits make one another


def _three_files(folder: Path) -> tuple[Path, Path, Path]:
    first, middle, last = (_write(folder, key) for key in _KEYS)
    return first, middle, last


def _keys(records: list[dict]) -> list[tuple[str, int]]:
    return [(r["key"], r["sequence"]) for r in records]


def test_a_truncated_file_is_reported_and_the_files_after_it_are_read(tmp_path: Path) -> None:
    _, middle, _ = _three_files(tmp_path)
    middle.write_bytes(middle.read_bytes()[:-40])
    damaged: list[DamagedFile] = []
    records = list(read_events(tmp_path, damaged=damaged))
    keys = _keys(records)
    assert [k for k in keys if k[0] != _KEYS[1]] == [(_KEYS[0], n) for n in range(5)] + [
        (_KEYS[2], n) for n in range(5)
    ]
    assert [d.path for d in damaged] == [middle]
    assert damaged[0].events_read == len([k for k in keys if k[0] == _KEYS[1]]) < 5
    assert str(middle) in str(damaged[0])


def test_a_file_that_is_not_avro_is_reported(tmp_path: Path) -> None:
    _three_files(tmp_path)
    junk = tmp_path / "b-junk.avro"
    junk.write_bytes(b"this is not an avro file")
    damaged: list[DamagedFile] = []
    assert len(list(read_events(tmp_path, damaged=damaged))) == 15
    assert [d.path for d in damaged] == [junk] and damaged[0].events_read == 0


def test_without_a_list_a_damaged_file_is_a_warning(tmp_path: Path) -> None:
    first, _, _ = _three_files(tmp_path)
    first.write_bytes(first.read_bytes()[:10])
    with pytest.warns(DamagedFileWarning, match=str(first)):
        assert len(list(read_events(tmp_path))) == 10


def test_typed_reading_skips_damage_too(tmp_path: Path) -> None:
    _, middle, _ = _three_files(tmp_path)
    middle.write_bytes(middle.read_bytes()[:-40])
    damaged: list[DamagedFile] = []
    assert (
        len([e for e in read_events(tmp_path, typed=True, damaged=damaged) if e.key != _KEYS[1]])
        == 10
    )
    assert len(damaged) == 1


_DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.floats(0.0, 0.999)),
    st.tuples(
        st.just("flip"),
        st.lists(st.tuples(st.floats(0, 0.999), st.integers(1, 255)), min_size=1, max_size=4),
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(which=st.integers(0, 2), damage=_DAMAGE)
def test_damaged_bytes_never_stop_the_reader(
    which: int, damage: tuple, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("log")
    files = _three_files(folder)
    bad = files[which]
    data = bytearray(bad.read_bytes())
    kind, how = damage
    if kind == "cut":
        data = data[: int(how * len(data))]
    else:
        for where, mask in how:
            data[int(where * len(data))] ^= mask
    bad.write_bytes(bytes(data))
    damaged: list[DamagedFile] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedFileWarning)  # a list given: no warning
        records = list(read_events(folder, damaged=damaged))
    bad_key = _KEYS[which]
    # an undetected flip may garble the bad file's own events (deflate has no checksum)
    good = [k for k in _keys(records) if k[0] in _KEYS and k[0] != bad_key]
    assert good == [(key, n) for key in _KEYS if key != bad_key for n in range(5)]
    assert all(d.path == bad for d in damaged) and len(damaged) <= 1
    if kind == "cut":
        assert len(damaged) == 1
