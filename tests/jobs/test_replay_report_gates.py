"""`streamagents replay-report` gates and exit codes, and properties of the comparison that
hold for any run sets."""

from __future__ import annotations

import operator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from replay_logs import scenario_logs

from streamagents.jobs.cli.main import main
from streamagents.jobs.replay.report import (
    GATE_METRICS,
    GateError,
    RunOutcome,
    check_gates,
    compare,
    parse_gate,
    summarize,
)
from streamagents.serde.messages import ToolCall


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return scenario_logs(tmp_path_factory.mktemp("gated"))


def _argv(logs: dict[str, Path], out: Path, *gates: str) -> list[str]:
    argv = ["replay-report", "--recorded", str(logs["recorded"])]
    argv += ["--candidate", str(logs["candidate"]), "--out", str(out)]
    return argv + [arg for gate in gates for arg in ("--fail-if", gate)]


def test_gates_that_hold_exit_1_and_name_themselves(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gates = ("new_errors>0", "changed_answers>20%", "tool_path_diverged>10", "missing<1")
    assert main(_argv(logs, tmp_path, *gates)) == 1
    err = capsys.readouterr().err.splitlines()
    # 1 new error; 1 of 7 answers changed (14.29%); 1 diverged tool path; 1 input missing
    assert err == ["gate failed: new_errors>0 (is 1)"]
    assert (tmp_path / "summary.json").exists() and (tmp_path / "report.html").exists()


def test_gates_that_do_not_hold_exit_0(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(logs, tmp_path, "new_errors>1", "changed_answers>=15%")) == 0
    out = capsys.readouterr().out
    assert "8 inputs, 7 on both sides, 6 differ: answer_changed 1, tool_path_diverged 1" in out


def test_identical_logs_pass_every_zero_gate(logs: dict[str, Path], tmp_path: Path) -> None:
    argv = ["replay-report", "--recorded", str(logs["recorded"]), "--candidate"]
    argv += [str(logs["again"]), "--out", str(tmp_path)]
    zero = [f"{metric}>0" for metric in GATE_METRICS if not metric.startswith("judge")]
    assert main([*argv, *(arg for gate in zero for arg in ("--fail-if", gate))]) == 0


@pytest.mark.parametrize(
    "expression",
    ["new_errors>>0", "new_error>0", "bogus>1", "changed_answers>150%", "new_errors>1x", ">3", ""],
)
def test_a_bad_gate_is_a_usage_error_before_any_work(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], expression: str
) -> None:
    out = tmp_path / "report"
    assert main(_argv(logs, out, "new_errors>0", expression)) == 2
    assert f"--fail-if {expression!r}" in capsys.readouterr().err
    assert not out.exists()


def test_a_judge_gate_without_a_judge_is_a_usage_error(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(logs, tmp_path / "report", "judge_losses>=3")) == 2
    assert "judge_* gates need a judge" in capsys.readouterr().err


def test_a_log_path_that_names_nothing_is_a_usage_error(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay-report", "--recorded", str(tmp_path / "nowhere"), "--candidate"]
    assert main([*argv, str(logs["candidate"]), "--out", str(tmp_path / "report")]) == 2
    assert "no file or directory" in capsys.readouterr().err


def test_a_damaged_log_file_is_read_to_its_damage_and_named(
    logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (whole,) = sorted(logs["candidate"].glob("*.avro"))
    damaged = tmp_path / whole.name
    damaged.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    argv = ["replay-report", "--recorded", str(logs["recorded"]), "--candidate", str(damaged)]
    assert main([*argv, "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr()
    assert f"warning: candidate log: {damaged}: " in printed.err
    assert "the rest skipped" in printed.err
    assert "8 inputs, 0 on both sides" in printed.out  # nothing before the damage survives


def test_judge_model_needs_a_rubric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay-report", "--recorded", "a", "--candidate", "b", "--out", str(tmp_path)]
    assert main([*argv, "--judge-model", "openai:gpt-test"]) == 2
    assert main([*argv, "--judge-model", "nobody:model", "--rubric", "r.md"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "streamagents replay-report: --judge-model needs --rubric FILE",
        "streamagents replay-report: --judge-model 'nobody:model': expected PROVIDER:MODEL "
        "with a provider of gemini, gemini-interactions, openai, openai-responses",
    ]


_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}


@settings(deadline=None)  # no timing: the machine is shared
@given(
    metric=st.sampled_from([m for m in GATE_METRICS if not m.startswith("judge")]),
    op=st.sampled_from(list(_OPS)),
    threshold=st.integers(0, 20),
    count=st.integers(0, 20),
    spaced=st.booleans(),
)
def test_a_count_gate_holds_exactly_when_its_comparison_does(
    metric: str, op: str, threshold: int, count: int, spaced: bool
) -> None:
    kind = GATE_METRICS[metric][1]
    summary = {"counts": {kind: count}, "rates": {kind: count / 20}}
    text = f" {metric} {op} {threshold} " if spaced else f"{metric}{op}{threshold}"
    assert parse_gate(text).metric == metric
    assert bool(check_gates(summary, [text])) == _OPS[op](count, threshold)
    percent = f"{metric}{op}{threshold * 5}%"  # the rate, in percent
    assert bool(check_gates(summary, [percent])) == _OPS[op](count * 5, threshold * 5)


@settings(deadline=None)  # no timing: the machine is shared
@given(st.text(max_size=12))
def test_any_text_parses_as_a_gate_or_says_why_not(text: str) -> None:
    try:
        gate = parse_gate(text)
    except GateError as error:
        assert str(error).startswith("--fail-if ")
    else:
        assert gate.metric in GATE_METRICS


def _outcome(key: str, input_id: str, status: str, text: str, tools: list[str]) -> RunOutcome:
    return RunOutcome(
        key=key,
        input_id=input_id,
        run_id=f"run-{key}-{input_id}",
        status=status,
        error_kind=None if status == "ok" else "ServerError",
        error_message=None,
        text=text if status == "ok" else "",
        tool_calls=tuple(
            ToolCall(id=f"c{n}", name=t, arguments={"n": n}) for n, t in enumerate(tools)
        ),
        input_tokens=len(text),
        output_tokens=len(tools),
        cost_usd=None,
        latency_ms=float(len(text) * 10),
    )


run_sets = st.dictionaries(
    st.tuples(st.sampled_from("abc"), st.sampled_from(["1", "2", "3"])),
    st.tuples(
        st.sampled_from(["ok", "error", "incomplete"]),
        st.text("xy ", max_size=4),
        st.lists(st.sampled_from(["camera", "lookup"]), max_size=2),
    ),
    max_size=9,
).map(lambda found: {place: _outcome(*place, *facts) for place, facts in found.items()})


@settings(deadline=None)  # no timing: the machine is shared
@given(run_sets)
def test_a_run_set_compared_with_itself_has_no_difference(runs: dict) -> None:
    summary = summarize(compare(runs, runs))
    assert summary["differing"] == 0 and set(summary["counts"].values()) <= {0}
    assert summary["tokens"]["delta_total"] == 0 and summary["worst_keys"] == []


@settings(deadline=None)  # no timing: the machine is shared
@given(run_sets, run_sets)
def test_comparing_the_other_way_swaps_new_and_fixed_errors(a: dict, b: dict) -> None:
    forth, back = summarize(compare(a, b))["counts"], summarize(compare(b, a))["counts"]
    assert forth["new_error"] == back["fixed_error"] and forth["fixed_error"] == back["new_error"]
    for kind in ("answer_changed", "tool_path_diverged", "error_changed", "missing"):
        assert forth[kind] == back[kind]
