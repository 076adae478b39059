"""`streamagents.jobs.replay.report`: recorded and candidate logs made by the real engine,
compared input by input, summarised, and written as JSON lines, a summary and a page."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from replay_logs import INPUTS, PHOTO, scenario_logs
from sample_runs import HOSTILE

from streamagents.connectors.eventlog import read_events
from streamagents.jobs.replay.report import compare, load_runs, write_report


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return scenario_logs(tmp_path_factory.mktemp("replay"))


def _by_input(path: Path) -> dict[str, dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {line["input_id"]: line for line in map(json.loads, lines)}


def test_an_identical_pair_has_no_difference(logs: dict[str, Path], tmp_path: Path) -> None:
    comparison = compare(load_runs([logs["recorded"]]), load_runs([logs["again"]]))
    assert len(comparison.inputs) == len(INPUTS)
    assert [item.differences for item in comparison.inputs] == [()] * len(INPUTS)
    summary = write_report(comparison, tmp_path).summary
    assert summary["differing"] == 0 and set(summary["counts"].values()) == {0}
    assert summary["tokens"]["delta_total"] == 0 and summary["worst_keys"] == []


def test_each_difference_kind_is_detected_on_its_input(logs: dict[str, Path]) -> None:
    comparison = compare(load_runs([logs["recorded"]]), load_runs([logs["candidate"]]))
    found = {item.input_id: item.differences for item in comparison.inputs}
    assert found == {
        "i1": (),
        "i2": ("answer_changed",),
        "i3": ("tool_path_diverged",),
        "i4": ("new_error",),
        "i5": ("fixed_error",),
        "i6": ("error_changed",),
        "i7": ("missing",),
        "i8": (),  # the same arguments in another key order: the same tool path
    }


def test_a_run_outcome_holds_what_the_log_says(logs: dict[str, Path]) -> None:
    runs = load_runs([logs["candidate"]]).runs
    photo, refund = runs[("k2", "i3")], runs[("k2", "i4")]
    assert (photo.status, photo.text) == ("ok", "A yellow box.")
    assert [(c.name, c.arguments) for c in photo.tool_calls] == [("camera", {"name": "south"})]
    assert [p.ref.size_bytes for p in photo.input_media if p.ref] == [len(PHOTO)]
    assert [p.kind for p in photo.tool_media] == ["image"]
    assert (refund.status, refund.error_kind, refund.text) == ("error", "BadRequest", "")
    events = [e for e in read_events(logs["candidate"], typed=True) if e.run_id == photo.run_id]
    assert photo.latency_ms == events[-1].timestamp_ms - events[0].timestamp_ms > 0
    assert (photo.input_tokens, photo.output_tokens) == (20, 15)  # two model calls
    assert photo.cost_usd == pytest.approx((20 * 1.0 + 15 * 2.0) / 1e6)


def test_summary_counts_rates_deltas_and_worst_keys(logs: dict[str, Path], tmp_path: Path) -> None:
    comparison = compare(load_runs([logs["recorded"]]), load_runs([logs["candidate"]]))
    summary = write_report(comparison, tmp_path).summary
    assert (summary["inputs"], summary["compared"], summary["recorded_only"]) == (8, 7, 1)
    assert summary["differing"] == 6
    assert summary["counts"]["new_error"] == 1 and summary["rates"]["new_error"] == 1 / 7
    assert summary["rates"]["missing"] == 1 / 8
    lines = _by_input(tmp_path / "comparison.jsonl")
    both = [line for line in lines.values() if line["recorded"] and line["candidate"]]

    def tokens(side: dict[str, Any]) -> int:
        return side["input_tokens"] + side["output_tokens"]

    deltas = [tokens(line["candidate"]) - tokens(line["recorded"]) for line in both]
    assert summary["tokens"]["delta_total"] == sum(deltas) == 45 - 15 + 15
    assert summary["tokens"]["delta_median"] == statistics.median_low(deltas)
    assert summary["tokens"]["delta_p95"] == max(deltas) == 45
    latency = [line["candidate"]["latency_ms"] - line["recorded"]["latency_ms"] for line in both]
    assert summary["latency_ms"]["delta_total"] == sum(latency)
    assert summary["cost_usd"]["priced_inputs"] == 7
    # i2 costs 80 µ$ instead of 20; i4's failed call costs nothing, i5's answer 20 µ$
    assert summary["cost_usd"]["delta_total"] == pytest.approx(60e-6 - 20e-6 + 20e-6)
    assert [row["key"] for row in summary["worst_keys"]] == [
        "k2",
        "k3",
        "k1",
        "k4",
    ]  # 2, 2, 1 + text distance, 1
    assert summary["worst_keys"][0]["differing_inputs"] == 2


def test_comparison_lines_put_both_sides_of_each_input(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    comparison = compare(load_runs([logs["recorded"]]), load_runs([logs["candidate"]]))
    write_report(comparison, tmp_path)
    lines = _by_input(tmp_path / "comparison.jsonl")
    assert len(lines) == len(INPUTS)
    photo = lines["i3"]
    assert photo["recorded"]["tool_calls"] == [{"name": "camera", "arguments": {"name": "north"}}]
    assert photo["candidate"]["tool_calls"] == [{"name": "camera", "arguments": {"name": "south"}}]
    assert photo["input_media"][0]["mime_type"] == "image/png"
    assert lines["i2"]["candidate"]["text"] == f"Rain {HOSTILE}"
    assert lines["i7"]["candidate"] is None and lines["i7"]["differences"] == ["missing"]
    assert lines["i4"]["candidate"]["error_kind"] == "BadRequest"


def test_page_escapes_hostile_text_and_shows_the_images_both_saw(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    comparison = compare(load_runs([logs["recorded"]]), load_runs([logs["candidate"]]))
    media = str(logs["recorded"].parent / "media")
    write_report(comparison, tmp_path, gates=["new_errors>0"], media_root=media)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert HOSTILE not in page and "<script" not in page.lower()
    assert "Rain &lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert "script-src 'none'" in page
    section = page.split('data-input="i3"', 1)[1].split("</section>", 1)[0]
    # the input's photo once (both saw it), and each side's camera picture (the same bytes)
    assert section.count('src="data:image/png;base64,') == 3
    assert section.index('data-side="recorded"') < section.index('data-side="candidate"')
    assert "new_errors&gt;0 (is 1)" in page
    assert page.count('<section class="run"') == 6  # the differing inputs only
