"""The viewer, the replay report and the topic copy read media only from the store they are
given (`--media`, or the log spec's), never from an address a logged ref names."""

from __future__ import annotations

import json
from pathlib import Path

from replay_runs import record
from sample_runs import write_sample_log

from streamagents.jobs.cli.main import main
from streamagents.jobs.eventlog_topic import EventMessages
from streamagents.jobs.replay.topic_log import TopicMessage, write_topic_log
from streamagents.testing import EchoTestModel


def test_the_viewer_without_media_reads_no_store_a_ref_names(tmp_path: Path) -> None:
    sample = write_sample_log(tmp_path / "sample")
    out = tmp_path / "page.html"
    assert main(["eventlog", "view", str(sample.log_dir), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "data:image" not in page  # the store the refs name holds them, but is not read
    assert f'class="media-missing" data-ref="{sample.user_image.sha256}"' in page
    assert (
        main(
            [
                "eventlog",
                "view",
                str(sample.log_dir),
                "--out",
                str(out),
                "--media",
                str(sample.media_root),
            ]
        )
        == 0
    )
    assert "data:image" in out.read_text(encoding="utf-8")


def test_the_topic_copy_without_a_store_reads_no_store_a_ref_names(tmp_path: Path) -> None:
    long_line = json.dumps({"id": "b-1", "key": "B", "text": "x" * 70_000})
    recorded = record(tmp_path, EchoTestModel(), [("B", long_line)])
    encode = EventMessages("verbose", str(tmp_path / "topic-media"), 65536)
    try:
        values = [encode.map(line)[1] for c, line in recorded.emitted if c == "events"]
    finally:
        encode.close()
    messages = [TopicMessage(0, offset, value) for offset, value in enumerate(values)]
    copied = write_topic_log(messages, tmp_path / "recorded")
    assert len(copied.unreadable) == 1  # the store is there, but nobody named it
    assert "--media" in next(iter(copied.unreadable.values()))
    named = write_topic_log(messages, tmp_path / "named", str(tmp_path / "topic-media"))
    assert named.unreadable == {} and named.offloaded >= 1
