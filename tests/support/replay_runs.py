"""Record runs on the engine harness, write their event log, and replay it: the parts the
replay tests share, with tools that count their calls and a small comparison of runs.

`lookup` answers with JSON, `snapshot` with text and an image above the offload threshold
(a media ref in the log), `send_refund` has side effects; `CALLS` counts each tool's calls,
so a test sees whether a replay ran a tool or answered from the recording."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from e2e_tools import image_bytes
from engine_harness import EngineHarness, harness

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.connectors.providers import ChatModel
from streamagents.jobs.replay.lines import InputSource, recorded_runs, replay_lines
from streamagents.serde.events import AgentEvent
from streamagents.serde.messages import ImagePart, TextPart

__all__ = [
    "CALLS",
    "lookup",
    "outcomes",
    "record",
    "replay",
    "send_refund",
    "snapshot",
    "write_log",
]

CALLS: Counter[str] = Counter()
"""How often each tool below ran."""


def lookup(order: str) -> dict[str, str]:
    """Look an order up.

    Args:
        order: The order number.
    """
    CALLS["lookup"] += 1
    return {"order": order, "status": "paid"}


def snapshot(order: str) -> list[object]:
    """A photo of an order's parcel.

    Args:
        order: The order number.
    """
    CALLS["snapshot"] += 1
    return [TextPart(text=f"parcel {order}"), ImagePart(mime_type="image/png", data=image_bytes(7))]


def send_refund(order: str) -> str:
    """Refund an order (money leaves the shop).

    Args:
        order: The order number.
    """
    CALLS["send_refund"] += 1
    return f"refunded {order}"


def record(
    tmp_path: Path, model: ChatModel, lines: Sequence[tuple[str, str]], **config: Any
) -> EngineHarness:
    """A production run of `lines` (key, line) on the harness, settled."""
    h = harness(tmp_path, model, [lookup, snapshot, send_refund], **config)
    for key, line in lines:
        h.send(key, line)
        h.settle_all()
    return h


def write_log(h: EngineHarness, folder: Path, level: str, version: int | None = None) -> Path:
    """The harness's events written as an event log at `level` (schema `version`)."""
    events = [AgentEvent.model_validate_json(line) for c, line in h.emitted if c == "events"]
    options = {} if version is None else {"version": version}
    with EventLogWriter(folder, level=level, **options) as writer:
        writer.write_all(events)
    return folder


def replay(
    tmp_path: Path,
    log: Path,
    model: ChatModel,
    source: Path | None = None,
    tools: Sequence[Any] = (lookup, snapshot, send_refund),
    **config: Any,
) -> tuple[EngineHarness, list[str], list[Any]]:
    """A replay job of the log on the harness (the same media store as the recording):
    the harness, the lines it read and the runs left out."""
    runs = recorded_runs([log])
    lines, left_out = replay_lines(runs, None if source is None else InputSource(source))
    h = harness(tmp_path, model, tools, replay=True, **config)
    for line in lines:
        h.send(json.loads(line)["key"], line)
        h.settle_all()
    return h, lines, left_out


def outcomes(h: EngineHarness) -> dict[str, dict[str, Any]]:
    """What a comparison of two runs of an input looks at, by input id: the answer's text,
    the status, and the tool calls (name and arguments, in order)."""
    calls: dict[str, list[tuple[str, Any]]] = {}
    for event in _events(h):
        if event["event_type"] == "tool_request":
            for call in event["payload"]["tool_calls"]:
                calls.setdefault(event["run_id"], []).append((call["name"], call["arguments"]))
    return {
        out["id"]: {
            "text": out["text"],
            "status": out["status"],
            "tool_calls": calls.get(out["run_id"], []),
        }
        for out in h.outputs()
    }


def _events(h: EngineHarness) -> Iterable[dict[str, Any]]:
    return h.records("events")
