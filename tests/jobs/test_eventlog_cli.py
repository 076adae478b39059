"""`streamagents eventlog cat|stats` through the real command-line entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.jobs.cli.main import main
from streamagents.serde.chat import GroundingSource, ServerToolEvidence, TokenUsage
from streamagents.serde.events import new_event
from streamagents.serde.messages import ChatMessage, ToolCall


@pytest.fixture()
def log_dir(tmp_path: Path) -> Path:
    """A folder with one v1 file and one v2 file of a small run over two keys."""
    for version, key in ((1, "alice"), (2, "bob")):
        ids = {"job_id": "job", "key": key, "run_id": f"run-{key}"}
        call = ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})
        events = [
            new_event("input", sequence=0, messages=[ChatMessage.user("Weather?")], **ids),
            *(
                new_event(
                    "chat_response",
                    sequence=n,
                    model="gpt-x",
                    usage=TokenUsage(input_tokens=100, output_tokens=10),
                    latency_ms=latency,
                    tool_calls=[call],
                    finish_reason="tool_calls",
                    **ids,
                )
                for n, latency in ((1, 100.0), (2, 300.0))
            ),
            new_event(
                "tool_response",
                sequence=3,
                tool_results=[ChatMessage.tool_result("c1", "weather", "down", is_error=True)],
                latency_ms=200.0 if key == "alice" else 400.0,
                **ids,
            ),
            new_event("error", sequence=4, error_class="RateLimited", error_message="429", **ids),
        ]
        with EventLogWriter(tmp_path, version=version, prefix=f"v{version}") as writer:
            writer.write_all(events)
    return tmp_path


def test_cat_json_prints_one_object_per_event_under_the_newest_version(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eventlog", "cat", str(log_dir), "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(events) == 10
    assert {
        e["payload"]["finish_reason"] for e in events if e["event_type"] == "chat_response"
    } == {
        None,
        "tool_calls",
    }  # v1 file: default null; v2 file: the value
    assert events[0]["timestamp"].endswith("+00:00")


def test_cat_under_version_1_drops_fields_added_later(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eventlog", "cat", str(log_dir), "--version", "1", "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert not any("finish_reason" in e["payload"] for e in events)


def test_cat_prints_a_readable_line_per_event(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eventlog", "cat", str(log_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "chat_response  key=alice  run=run-alice  seq=1  model=gpt-x  tokens=100/10" in lines[1]
    assert lines[1].endswith('latency=100.0ms  "weather({\\"city\\":\\"Oslo\\"})"')
    assert lines[4].endswith('error=RateLimited  "429"')


def test_stats_counts_types_keys_tokens_errors_and_latency(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eventlog", "stats", str(log_dir), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {
        "events": 10,
        "by_type": {"chat_response": 4, "error": 2, "input": 2, "tool_response": 2},
        "keys": 2,
        "runs": 2,
        "tokens": {"input": 400, "output": 40, "cached": 0},
        "server_tools": {},
        "context_cache": {},
        "errors": 2,
        "tool_errors": 2,
        "latency_ms": {"count": 6, "p50": 200.0, "p90": 400.0, "p99": 400.0, "max": 400.0},
    }


def test_stats_prints_a_table(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eventlog", "stats", str(log_dir)]) == 0
    out = capsys.readouterr().out
    assert "tokens       input 400  output 40" in out
    assert "latency ms   p50 200.0  p90 400.0  p99 400.0  max 400.0  (n=6)" in out


def test_a_missing_path_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eventlog", "stats", str(tmp_path / "nope")]) == 2
    assert "no file or directory" in capsys.readouterr().err


def test_cat_names_a_damaged_file_prints_every_good_event_and_exits_3(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = sorted(log_dir.glob("v1-*.avro"))[0]
    first.write_bytes(first.read_bytes()[:-30])  # sorted first: the v2 file comes after it
    assert main(["eventlog", "cat", "--json", str(log_dir)]) == 3
    captured = capsys.readouterr()
    keys = [json.loads(line)["key"] for line in captured.out.splitlines()]
    assert keys.count("bob") == 5
    assert f"damaged file {first}" in captured.err and "Traceback" not in captured.err


def test_stats_counts_the_good_files_and_lists_the_damaged_one(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = sorted(log_dir.glob("v1-*.avro"))[0]
    first.write_bytes(b"Obj\x01 garbage")
    assert main(["eventlog", "stats", "--json", str(log_dir)]) == 3
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["events"] == 5
    assert [d["path"] for d in summary["damaged_files"]] == [str(first)]
    assert str(first) in captured.err
    assert main(["eventlog", "stats", str(log_dir)]) == 3
    assert "damaged      1 file(s)" in capsys.readouterr().out


def test_cat_and_stats_show_server_tool_evidence_and_cache_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {"job_id": "job", "key": "k", "run_id": "run-k"}
    search = ServerToolEvidence(
        tool="google_search",
        queries=["opening hours"],
        sources=[GroundingSource(uri="https://a.example", title="A"), GroundingSource(uri="b:")],
    )
    code = ServerToolEvidence(
        tool="code_execution", language="PYTHON", code="print(1)", outcome="OUTCOME_OK"
    )
    events = [
        new_event(
            "chat_response",
            sequence=1,
            usage=TokenUsage(input_tokens=5000, output_tokens=20, cached_tokens=4800),
            **ids,
        ),
        new_event("server_tool", sequence=2, evidence=[search], **ids),
        new_event("server_tool", sequence=3, evidence=[code], **ids),
        new_event(
            "context_cache",
            sequence=4,
            attributes={"action": "evicted", "cache": "cachedContents/x", "reason": "gone"},
            **ids,
        ),
    ]
    with EventLogWriter(tmp_path) as writer:
        writer.write_all(events)
    assert main(["eventlog", "cat", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "tokens=5000/20  cached=4800" in lines[0]
    assert lines[1].endswith("\"search 'opening hours', 2 source(s)\"")
    assert lines[2].endswith('"code (PYTHON) print(1) -> OUTCOME_OK"')
    assert lines[3].endswith('"evicted cachedContents/x: gone"')
    assert main(["eventlog", "stats", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tokens"] == {"input": 5000, "output": 20, "cached": 4800}
    assert summary["server_tools"] == {
        "code_execution": 1,
        "google_search": 1,
        "search_queries": 1,
        "sources": 2,
    }
    assert summary["context_cache"] == {"evicted": 1}
    assert main(["eventlog", "stats", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "(cached input 4800)" in table and "sources 2" in table and "evicted 1" in table
