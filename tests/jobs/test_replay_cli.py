"""`streamagents replay` without a job: what it refuses, and what it writes when nothing is
left to replay (the job itself: tests/e2e/test_run_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_runs import record, write_log

from streamagents.jobs.cli.main import main
from streamagents.testing import EchoTestModel

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


def _example(tmp_path: Path, old: str = "", new: str = "") -> Path:
    spec = tmp_path / "candidate.yaml"
    text = EXAMPLE.read_text().replace("path: data/tickets", f"path: {EXAMPLE.parent}/data/tickets")
    spec.write_text(text.replace(old, new) if old else text)
    return spec


def test_runs_it_cannot_replay_are_listed_and_no_production_sink_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    line = json.dumps({"id": "long-1", "customer": {"id": "C-1"}, "text": "z" * 3000})
    recorded = record(tmp_path, EchoTestModel(), [("C-1", line)], key_field="customer.id")
    log = write_log(recorded, tmp_path / "log", "standard")
    out = tmp_path / "replay"
    assert (
        main(["replay", "--log", str(log), "--spec", str(_example(tmp_path)), "--out", str(out)])
        == 0
    )
    assert "1 recorded runs, 1 chosen, 0 to replay, 1 not replayable" in capsys.readouterr().out
    [left_out] = [json.loads(x) for x in (out / "not_replayable.jsonl").read_text().splitlines()]
    assert left_out["input_id"] == "long-1" and "prefix" in left_out["reason"]
    assert json.loads((out / "replay.json").read_text())["replayed_runs"] == 0
    assert not (tmp_path / "out").exists()  # the spec's sinks and event log (out/...)


def test_replay_refuses_a_folder_that_holds_an_earlier_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "replay" / "outputs").mkdir(parents=True)
    spec = _example(tmp_path)
    assert (
        main(
            [
                "replay",
                "--log",
                str(tmp_path),
                "--spec",
                str(spec),
                "--out",
                str(tmp_path / "replay"),
            ]
        )
        == 2
    )
    assert "already holds outputs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--fail-if", "changed_answers>>1"], "changed_answers>>1"),
        (["--fail-if", "judge_losses>0"], "need a judge"),
        (["--judge-model", "gemini:gemini-2.5-flash"], "needs --rubric"),
    ],
)
def test_a_bad_gate_or_judge_stops_the_replay_before_its_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], said: str
) -> None:
    line = json.dumps({"id": "t-1", "customer": {"id": "C-1"}, "text": "hello"})
    recorded = record(tmp_path, EchoTestModel(), [("C-1", line)], key_field="customer.id")
    log = write_log(recorded, tmp_path / "log", "verbose")
    out = tmp_path / "replay"
    argv = ["replay", "--log", str(log), "--spec", str(_example(tmp_path)), "--out", str(out)]
    assert main([*argv, *options]) == 2
    assert said in capsys.readouterr().err
    assert not (out / "inputs").exists()  # nothing was read into a job, no job ran


@pytest.mark.parametrize(
    "entry",
    [
        "{ref: streamagents.jobs.examples.support_tools:refund, side_effects: true, replay: live}",
        "{ref: streamagents.jobs.examples.support_tools:refund, approval: required, replay: live}",
    ],
)
def test_validate_refuses_live_replay_of_a_tool_with_side_effects_or_approval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str
) -> None:
    spec = _example(
        tmp_path,
        "    - streamagents.jobs.examples.support_tools:fetch_attachment",
        f"    - {entry}",
    )
    assert main(["validate", str(spec)]) == 2
    assert "replay: live is refused" in capsys.readouterr().err
