"""The step before every sink: records within the sink's limit, the rest in the media store."""

from __future__ import annotations

import json
from pathlib import Path

from streamagents.connectors.media import MediaStore
from streamagents.connectors.record_offload import MIN_MAX_RECORD_BYTES, PREFIX_CHARS
from streamagents.operators.agent.emitted_records import dead_letter_record
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.flink.bounded_records import BoundRecords
from streamagents.serde.messages import MediaRef


def test_records_that_fit_pass_unchanged_and_start_no_store(tmp_path: Path) -> None:
    bound = BoundRecords(str(tmp_path / "media"), MIN_MAX_RECORD_BYTES)
    bound.open(None)
    record = json.dumps({"id": "a", "text": "short"})
    assert bound.map(record) is record
    bound.close()
    assert not (tmp_path / "media").exists()


def test_a_dead_letter_whose_bytes_are_stored_keeps_that_ref_when_clipped(
    tmp_path: Path,
) -> None:
    store = MediaStore(str(tmp_path / "media"))
    exact = store.put(b"\xff" + b"x" * 100_000, "application/octet-stream")
    letter = dead_letter_record(
        "parse",
        ErrorInfo(type="InvalidText", message="input is not valid UTF-8 text"),
        "\ufffd" + "x" * 100_000,
        received_bytes=exact,
    )
    bound = BoundRecords(str(tmp_path / "media"), MIN_MAX_RECORD_BYTES)
    bound.open(None)
    try:
        bounded = json.loads(bound.map(letter))
    finally:
        bound.close()
    assert bounded["input"] == ("\ufffd" + "x" * 100_000)[:PREFIX_CHARS]
    assert MediaRef.model_validate(bounded["offloaded"]["input"]) == exact
