"""Avro event log against JSON lines: encode and decode events/s and bytes/event, one run.

Run: `python benchmarks/bench_eventlog.py [--events N]`. The process is pinned to one
core. Every figure comes from the same events, in the same process, side by side.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import io
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fastavro
from fastavro.write import Writer

from streamagents.connectors.eventlog import (
    DEFLATE_LEVEL,
    SYNC_INTERVAL,
    EventLogWriter,
    default_codec,
)
from streamagents.serde.avro import (
    LATEST_VERSION,
    from_record,
    parsed_schema,
    record_encoder,
    to_record,
)
from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, RunEvent, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart, ToolCall


def run_events(run: int) -> list[AgentEvent]:
    """The six events of one agent run with an image input and one tool call."""
    key = f"customer-{run % 500}"
    ids = {"job_id": "support-bot", "key": key, "run_id": f"run-{run:08d}"}
    ref = MediaRef(sha256=f"{run:064x}", mime_type="image/jpeg", size_bytes=48_213 + run, uri=None)
    question = ChatMessage.user(
        [
            TextPart(text=f"Order {run} arrived damaged, see the photo. What can you do for me?"),
            ImagePart(mime_type="image/jpeg", ref=ref),
        ]
    )
    call = ToolCall(
        id=f"call-{run}",
        name="lookup_order",
        arguments={"order_id": str(run), "fields": ["status", "items", "shipping"]},
        metadata={"thought_signature": os.urandom(64)},
    )
    answer = ChatMessage(
        role="assistant", parts=[TextPart(text="Let me check.")], tool_calls=[call]
    )
    result = ChatMessage.tool_result(
        call.id, call.name, json.dumps({"status": "delivered", "items": 3, "carrier": "DHL"})
    )
    final = ChatMessage(
        role="assistant",
        content=(
            f"I am sorry about order {run}. It was delivered by DHL with 3 items; I have opened a "
            "replacement request and you will get a confirmation e-mail within the hour."
        ),
    )
    usage = TokenUsage(input_tokens=812 + run % 97, output_tokens=64 + run % 31)
    return [
        new_event("input", sequence=0, messages=[question], **ids),
        new_event("chat_request", sequence=1, messages=[question], model="gemini-2.5-flash", **ids),
        new_event(
            "chat_response",
            sequence=2,
            messages=[answer],
            usage=usage,
            model="gemini-2.5-flash",
            latency_ms=812.5 + run % 300,
            finish_reason="STOP",
            attempts=1,
            **ids,
        ),
        new_event("tool_request", sequence=3, tool_calls=[call], **ids),
        new_event("tool_response", sequence=4, tool_results=[result], latency_ms=23.0, **ids),
        new_event("output", sequence=5, messages=[final], usage=usage, latency_ms=1640.0, **ids),
    ]


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds `action` took (best of three, garbage collector paused as timeit does)."""
    best, result = float("inf"), None
    for _ in range(3):
        result = None
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            result = action()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best, result


def write_log(directory: Path, events: list[Any], level: str, version: int) -> int:
    """Write `events` with an EventLogWriter into an empty `directory`; returns the bytes."""
    for old in directory.glob("*.avro"):
        old.unlink()
    with EventLogWriter(directory, level=level, version=version) as writer:
        writer.write_all(events)
    return sum(path.stat().st_size for path in writer.finished)


def read_dicts(directory: Path, version: int | None = None) -> list[dict[str, Any]]:
    """Every record in `directory`, read by fastavro (resolved when `version` is given)."""
    reader_schema = None if version is None else parsed_schema(version)
    records: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.avro")):
        with open(path, "rb") as handle:
            records.extend(fastavro.reader(handle, reader_schema=reader_schema))
    return records


def serialize_only(records: list[dict[str, Any]], codec: str) -> bytes:
    """Prebuilt Avro records written to an in-memory container file: fastavro's share."""
    buffer = io.BytesIO()
    level = DEFLATE_LEVEL if codec == "deflate" else None
    writer = Writer(
        buffer,
        parsed_schema(LATEST_VERSION),
        codec=codec,
        sync_interval=SYNC_INTERVAL,
        compression_level=level,
    )
    for record in records:
        writer.write(record)
    writer.flush()
    return buffer.getvalue()


def encode_only(records: list[dict[str, Any]], codec: str) -> bytes:
    """Prebuilt Avro records encoded by the compiled encoder and written as one block, as
    `EventLogWriter` does."""
    buffer = io.BytesIO()
    level = DEFLATE_LEVEL if codec == "deflate" else None
    writer = Writer(buffer, parsed_schema(LATEST_VERSION), codec=codec, compression_level=level)
    encoder = record_encoder(LATEST_VERSION)
    block = bytearray()
    count = 0
    for record in records:
        encoder.encode_into(block, record)
        count += 1
        if len(block) >= SYNC_INTERVAL:
            writer.write_block(SimpleNamespace(num_records=count, bytes_=io.BytesIO(block)))
            block.clear()
            count = 0
    if count:
        writer.write_block(SimpleNamespace(num_records=count, bytes_=io.BytesIO(block)))
    writer.flush()
    return buffer.getvalue()


def main() -> None:
    """Print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=30_000)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    events = [e for run in range(args.events // 6) for e in run_events(run)]
    count = len(events)
    lines = [e.model_dump_json() for e in events]
    json_bytes = sum(len(line) + 1 for line in lines)
    rows: list[tuple[str, str, str, str, str]] = []

    def add(name: str, encode_s: float | None, decode_s: float | None, size: int | None) -> None:
        rows.append(
            (
                name,
                "-" if encode_s is None else f"{count / encode_s:,.0f}",
                "-" if decode_s is None else f"{count / decode_s:,.0f}",
                "-" if size is None else f"{size / count:.1f}",
                "-" if size is None else f"{size / json_bytes:.3f}",
            )
        )

    enc_json, _ = timed(lambda: "\n".join(e.model_dump_json() for e in events))
    dec_models, _ = timed(lambda: [AgentEvent.model_validate_json(line) for line in lines])
    add("JSON lines: models <-> text", enc_json, dec_models, json_bytes)
    dec_dicts, _ = timed(lambda: [json.loads(line) for line in lines])
    add("JSON lines: models -> text, text -> dicts", enc_json, dec_dicts, json_bytes)
    blob = "\n".join(lines).encode()
    enc_gz, gz = timed(lambda: gzip.compress(blob, 6))
    dec_gz, _ = timed(lambda: [json.loads(x) for x in gzip.decompress(gz).splitlines()])
    add("JSON lines + gzip -6 (dicts)", enc_json + enc_gz, dec_gz, len(gz))

    codec = default_codec()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for level in ("standard", "verbose"):
            enc, size = timed(lambda level=level: write_log(folder, events, level, LATEST_VERSION))
            dec, _ = timed(lambda: read_dicts(folder))
            add(f"Avro {codec} {level}: models -> file -> dicts", enc, dec, size)
        dec_typed, _ = timed(lambda: [from_record(r) for r in read_dicts(folder)])
        add(f"Avro {codec} verbose: file -> models", None, dec_typed, None)
        dec_v1, _ = timed(lambda: read_dicts(folder, version=1))
        add(f"Avro {codec} verbose: file -> dicts as v1 (resolved)", None, dec_v1, None)
        enc_lines, size = timed(lambda: write_log(folder, lines, "standard", LATEST_VERSION))
        add(f"Avro {codec} standard: JSON text -> file (the sink)", enc_lines, None, size)
        made = [RunEvent.of(e) for e in events]
        enc_made, size = timed(lambda: write_log(folder, made, "standard", LATEST_VERSION))
        add(f"Avro {codec} standard: RunEvents -> file (agent fn)", enc_made, None, size)
    enc_conv, built = timed(lambda: [to_record(e) for e in events])
    add("  encode step 1: models -> Avro records", enc_conv, None, None)
    enc_raw, _ = timed(lambda: serialize_only(built, codec))
    add(f"  encode step 2, fastavro: records -> {codec} blocks", enc_raw, None, None)
    enc_ours, _ = timed(lambda: encode_only(built, codec))
    add(f"  encode step 2, compiled: records -> {codec} blocks", enc_ours, None, None)

    print(
        f"{count} events ({count // 6} runs x 6 event types), Python "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores "
        f"(pinned to 1), fastavro {fastavro.__version__}, schema v{LATEST_VERSION}"
    )
    print(f"{'path':<54} {'encode ev/s':>12} {'decode ev/s':>12} {'bytes/ev':>9} {'x JSON':>7}")
    for name, enc_rate, dec_rate, per_event, ratio in rows:
        print(f"{name:<54} {enc_rate:>12} {dec_rate:>12} {per_event:>9} {ratio:>7}")


if __name__ == "__main__":
    main()
