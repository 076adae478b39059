"""The smallest real job runs on the mini-cluster with streamagents inside Flink's workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamagents.jobs import smoke


@pytest.mark.e2e
def test_smoke_job_offloads_media_and_counts_per_key(tmp_path: Path) -> None:
    outputs = smoke.run(str(tmp_path / "media"), threshold_bytes=1024, count=12)
    assert len(outputs) == 12
    last = {}
    for record in outputs:
        last[record["customer"]] = record
    assert sorted(last) == ["c0", "c1", "c2"]
    assert all(record["messages"] == 4 for record in last.values())
    assert all(len(record["refs"]) == 1 for record in outputs)
    assert all(record["record_bytes_in_state"] < 1024 for record in outputs)
    stored = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert len(stored) == 12
