"""Rerun to continue, on files: `kill -9` of `streamagents run` half-way through a folder of
inputs, then the same command again continues from the job's latest retained checkpoint,
says so, and finishes: every input answered once, none twice."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from cli_jobs import CLI, demo_env, start_run, wait_for
from rerun_jobs import INPUTS, kill_run, paced_spec, questions

from streamagents.connectors.files import read_jsonl


@pytest.mark.e2e
def test_a_killed_run_continues_when_run_again_and_answers_each_input_once(
    tmp_path: Path,
) -> None:
    inputs = tmp_path / "job" / "inputs"
    inputs.mkdir(parents=True)
    (inputs / "questions.jsonl").write_text("".join(line + "\n" for _, line in questions()))
    spec = paced_spec(
        tmp_path / "job",
        "rerun-files",
        {"files": {"path": "inputs"}},
        {"outputs": {"path": "out/answers"}, "dead_letters": {"path": "out/dead"}},
    )
    answers = spec.parent / "out" / "answers"
    process, first_job, _ = start_run(spec, tmp_path / "first.log")
    try:
        wait_for(lambda: len(read_jsonl(answers)) >= INPUTS // 5, 240)
    finally:
        kill_run(process)
    committed = len(read_jsonl(answers))
    assert committed < INPUTS, "the first run was to be killed half-way"
    folder = spec.parent / ".streamagents" / "rerun-files" / "rerun-files"
    assert list((folder / "checkpoints" / first_job).glob("chk-*/_metadata"))

    again = subprocess.run(
        [*CLI, "run", str(spec), "--progress-interval", "0.5"],
        env=demo_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    said = re.search(
        r"continuing from checkpoint (\d+) of the previous run \(job (\w+);", again.stdout
    )
    assert said is not None, again.stdout[:3000]
    assert said.group(2) == first_job
    assert "rerun-files: FINISHED" in again.stdout
    ids = Counter(record["id"] for record in read_jsonl(answers))
    assert sorted(ids) == [f"in-{n:03d}" for n in range(INPUTS)]
    assert set(ids.values()) == {1}
    assert read_jsonl(spec.parent / "out" / "dead") == []
