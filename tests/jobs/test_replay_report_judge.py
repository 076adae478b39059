"""The replay report's judge: a model through the real `openai` SDK to the loopback stub,
asked about each differing input in both orders, its verdicts combined and reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from replay_logs import scenario_logs

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.connectors.providers import create_model
from streamagents.jobs.cli.main import main
from streamagents.jobs.replay.report import compare, judge, load_runs, write_report

JUDGE_KEY = "sk-judge0123456789abcdefghijklmnop"
RUBRIC = "Prefer the answer that tells the weather honestly."


def _asked(request: RecordedRequest) -> tuple[str, str, str]:
    """The input, answer A and answer B of a judge request as the SDK sent it."""
    content = request.json["messages"][-1]["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    head, rest = text.split("=== Answer A ===\n", 1)
    a, b = rest.split("\n\n=== Answer B ===\n", 1)
    return head.removeprefix("Input:\n").split("\n")[0], a, b


def _reply(verdict: str, reason: str) -> dict[str, Any]:
    content = json.dumps({"verdict": verdict, "reason": reason})
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


def judge_double(request: RecordedRequest) -> StubReply | dict[str, Any]:
    """Test double of a judge, by input: a fair preference for the candidate (weather?), a
    position-biased one (photo?: always A), a reply that is not JSON (refund), a refused
    call that echoes the key (broken), a fair preference for the recorded run (both fail),
    and no opinion (anything else)."""
    asked, a, _ = _asked(request)
    if asked == "weather?":
        return _reply("A" if "Rain" in a else "B", "mentions rain")
    if asked == "photo?":
        return _reply("A", "the first one")
    if asked == "refund":
        return {"choices": [{"message": {"role": "assistant", "content": "I think A."}}]}
    if asked == "broken":
        body = {"error": {"message": f"invalid key {JUDGE_KEY}", "type": "invalid_request"}}
        return StubReply(body, status=400)
    if asked == "both fail":
        return _reply("A" if "BadRequest" in a else "B", "a clearer error")
    return _reply("tie", "no difference")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return scenario_logs(tmp_path_factory.mktemp("judged"))


@pytest.fixture
def judge_stub() -> Any:
    with LoopbackStubServer(judge_double) as server:
        yield server


def test_judge_asks_both_orders_and_combines_them(
    logs: dict[str, Path], judge_stub: LoopbackStubServer, tmp_path: Path
) -> None:
    model = create_model(
        "openai", "judge-test", api_key=JUDGE_KEY, base_url=f"{judge_stub.url}/v1", max_retries=0
    )
    comparison = compare(load_runs([logs["recorded"]]), load_runs([logs["candidate"]]))
    judged = judge(comparison, model, RUBRIC)
    verdicts = {item.input_id: item.verdict for item in judged.inputs}
    assert verdicts["i2"].preferred == "candidate" and not verdicts["i2"].flipped
    assert verdicts["i2"].reasons == ("mentions rain", "mentions rain")
    assert (verdicts["i3"].preferred, verdicts["i3"].flipped) == ("tie", True)  # position bias
    assert verdicts["i6"].preferred == "recorded"
    assert verdicts["i4"].preferred is None and "not a JSON object" in verdicts["i4"].error
    assert verdicts["i5"].preferred is None and verdicts["i5"].error.startswith("BadRequest")
    assert verdicts["i1"].preferred == "tie" and verdicts["i7"] is None  # same; one side only
    # each differing input that both sides ran was asked twice, once in each order
    asked = [_asked(r) for r in judge_stub.requests]
    assert sorted({a for a, _, _ in asked}) == [
        "both fail",
        "broken",
        "photo?",
        "refund",
        "weather?",
    ]
    weather = sorted(("Rain" in a, "Sunny" in b) for i, a, b in asked if i == "weather?")
    assert weather == [(False, False), (True, True)]
    assert all(RUBRIC in r.json["messages"][0]["content"] for r in judge_stub.requests)
    summary = write_report(judged, tmp_path, gates=["judge_losses>=1"]).summary
    assert {k: summary["judge"][k] for k in ("wins", "losses", "ties", "flipped", "failures")} == {
        "wins": 1, "losses": 1, "ties": 3, "flipped": 1, "failures": 2,
    }  # fmt: skip
    assert summary["gates"]["failed"] == ["judge_losses>=1 (is 1)"]
    for name in ("comparison.jsonl", "summary.json", "report.html"):
        assert JUDGE_KEY not in (tmp_path / name).read_text(encoding="utf-8")


def test_cli_judge_spec_gates_on_judge_losses(
    logs: dict[str, Path],
    judge_stub: LoopbackStubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", JUDGE_KEY)
    (tmp_path / "rubric.md").write_text(RUBRIC, encoding="utf-8")
    spec = tmp_path / "judge.yaml"
    spec.write_text(
        "model:\n  provider: openai\n  model: judge-test\n  options:\n"
        "    api_key: ${JUDGE_TEST_KEY}\n"
        f"    base_url: {judge_stub.url}/v1\n    max_retries: 0\n"
        "rubric_file: rubric.md\n",
        encoding="utf-8",
    )
    out = tmp_path / "report"
    argv = ["replay-report", "--recorded", str(logs["recorded"]), "--candidate"]
    argv += [str(logs["candidate"]), "--out", str(out), "--judge-spec", str(spec)]
    assert main([*argv, "--fail-if", "judge_losses>=1"]) == 1
    printed = capsys.readouterr()
    assert "gate failed: judge_losses>=1 (is 1)" in printed.err
    assert (
        "judge: 1 candidate better, 1 recorded better, 3 ties (1 flipped), 2 failed" in printed.out
    )
    assert main([*argv, "--fail-if", "judge_losses>1"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert 'data-verdict="candidate"' in page and "judge failed: BadRequest" in page
    assert JUDGE_KEY not in page + capsys.readouterr().err
