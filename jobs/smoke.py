"""The smallest real streamagents job: keyed messages with images into the media store.

It checks an installation end to end: PyFlink starts, its Python workers import
streamagents, keyed state works, and media leave the records for the store, so state holds
refs. Run it with `python -m streamagents.jobs.smoke`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import zlib
from collections.abc import Iterator, Sequence

from pyflink.common import Configuration, Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor

from streamagents.connectors.media import MediaStore
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart

__all__ = ["main", "sample_messages"]


def _png(width: int, height: int, seed: int) -> bytes:
    """A gradient PNG, built with zlib so the sample needs no image library."""

    def chunk(tag: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(tag + body) & 0xFFFFFFFF
        return len(body).to_bytes(4, "big") + tag + body + crc.to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    pixels = b"".join(
        b"\x00" + bytes((x * 7 + y * 13 + seed) % 256 for x in range(width * 3))
        for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(pixels, 1))
        + chunk(b"IEND", b"")
    )


def sample_messages(count: int = 12) -> list[str]:
    """Sample user messages as JSON, each with a text part and a distinct PNG screenshot."""
    messages = []
    for i in range(count):
        image = _png(160, 120, seed=i)
        message = ChatMessage.user(
            [
                TextPart(text=f"ticket {i}: the page looks broken"),
                ImagePart(mime_type="image/png", data=image),
            ]
        )
        messages.append(
            json.dumps({"customer": f"c{i % 3}", "message": message.model_dump(mode="json")})
        )
    return messages


class OffloadAndCount(KeyedProcessFunction):
    """Moves each message's media into the store and keeps a per-key count and byte total."""

    def __init__(self, store_root: str, threshold_bytes: int) -> None:
        self._store_root = store_root
        self._threshold = threshold_bytes

    def open(self, runtime_context: RuntimeContext) -> None:
        self._store = MediaStore(self._store_root)
        self._totals = runtime_context.get_state(ValueStateDescriptor("totals", Types.STRING()))

    def process_element(self, value: str, ctx: KeyedProcessFunction.Context) -> Iterator[str]:
        record = json.loads(value)
        message = self._store.offload(
            ChatMessage.model_validate(record["message"]), threshold_bytes=self._threshold
        )
        totals = json.loads(self._totals.value() or '{"messages": 0, "media_bytes": 0}')
        totals["messages"] += 1
        totals["media_bytes"] += sum(p.size_bytes or 0 for p in message.media)
        self._totals.update(json.dumps(totals))
        yield json.dumps(
            {
                "customer": ctx.get_current_key(),
                "refs": [p.ref.sha256 for p in message.media if p.ref is not None],
                "record_bytes_in_state": len(message.model_dump_json()),
                **totals,
            }
        )


def run(store_root: str, threshold_bytes: int = 1024, count: int = 12) -> list[dict]:
    """Run the job on the local mini-cluster and return its output records."""
    config = Configuration()
    config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    stream = (
        env.from_collection(sample_messages(count), type_info=Types.STRING())
        .key_by(lambda line: json.loads(line)["customer"], key_type=Types.STRING())
        .process(OffloadAndCount(store_root, threshold_bytes), output_type=Types.STRING())
    )
    with stream.execute_and_collect("streamagents-smoke") as results:
        return [json.loads(line) for line in results]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: run the job and print its per-key totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="media store root (default: a temp dir)")
    args = parser.parse_args(argv)
    store_root = args.store or os.path.join(tempfile.mkdtemp(prefix="streamagents-"), "media")
    outputs = run(store_root)
    final: dict[str, dict] = {}
    for record in outputs:
        final[record["customer"]] = record
    for customer, record in sorted(final.items()):
        print(
            f"{customer}: {record['messages']} messages, {record['media_bytes']} media bytes "
            f"in the store, {record['record_bytes_in_state']} bytes per message in state"
        )
    print(f"media store: {store_root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
