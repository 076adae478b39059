"""JSONL file source and sink on Flink's file connectors, run on the local mini-cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyflink.datastream import StreamExecutionEnvironment

from streamagents.connectors.files import jsonl_sink, jsonl_source, read_jsonl


def write_lines(path: Path, numbers: range) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"n": n}) + "\n" for n in numbers))


def wait_for(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return False


@pytest.mark.e2e
def test_bounded_directory_is_copied_once_and_committed_at_the_end(tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "a.jsonl", range(0, 40))
    write_lines(tmp_path / "in" / "b.jsonl", range(40, 70))
    (tmp_path / "in" / ".hidden.jsonl").write_text('{"n": -1}\n')
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(500)
    jsonl_sink(
        jsonl_source(env, str(tmp_path / "in")), str(tmp_path / "out"), prefix="rows", name="rows"
    )
    env.execute("files-bounded")

    records = read_jsonl(tmp_path / "out")
    assert sorted(r["n"] for r in records) == list(range(70))
    files = list((tmp_path / "out").iterdir())
    assert files and all(f.name.startswith("rows-") and f.name.endswith(".jsonl") for f in files)


@pytest.mark.e2e
def test_watched_directory_picks_up_new_files(tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "first.jsonl", range(5))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(500)
    source = jsonl_source(env, str(tmp_path / "in"), watch_interval_s=0.5)
    jsonl_sink(source, str(tmp_path / "out"), prefix="rows", name="rows")
    client = env.execute_async("files-watched")
    try:
        assert wait_for(lambda: len(read_jsonl(tmp_path / "out")) == 5)
        write_lines(tmp_path / "in" / "second.jsonl", range(5, 8))
        assert wait_for(lambda: len(read_jsonl(tmp_path / "out")) == 8)
    finally:
        client.cancel().result()
    assert sorted(r["n"] for r in read_jsonl(tmp_path / "out")) == list(range(8))
