"""Bounding emitted records: what a record holds beyond its sink's limit goes to the media store.

A sink takes records up to a size (Kafka's producer refuses one over `max.request.size`,
1 MiB by default, and a job that cannot write a record fails on it again after every
restart). `RecordOffload` keeps every record a sink gets within `max_bytes` (UTF-8 bytes
of the record value) and loses nothing:

1. A JSON record that fits is written as it is, byte for byte.
2. One over the limit has its longest text fields moved to the media store, longest
   first, until it fits: each keeps its first `PREFIX_CHARS` characters, and
   `offloaded.<field>` holds the ref of the whole value's UTF-8 bytes (`sha256`,
   `mime_type` `text/plain; charset=utf-8`, `size_bytes`, `uri`).
3. If that is not enough (many or large non-text fields), the whole record is stored too
   (`offloaded.record`, `application/json`) and the record keeps only its scalar fields;
   in the last resort only `offloaded`.

The store is content-addressed, so an offload repeated after a restore writes nothing new
and gives the same record. `keep_bytes` is the same step for bytes a record cannot hold as
text (an input line that is not UTF-8).
"""

from __future__ import annotations

import json
from typing import Any

from streamagents.connectors.media import MediaStore

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "JSON_MIME",
    "MIN_MAX_RECORD_BYTES",
    "OFFLOADED_FIELD",
    "PREFIX_CHARS",
    "TEXT_MIME",
    "RecordOffload",
    "fits",
    "utf8_size",
]

DEFAULT_MAX_RECORD_BYTES = 1_000_000
"""A sink's default record limit: under Kafka's 1 MiB `max.request.size` with room for the
record key (at most `max_key_chars` characters) and the batch's own bytes."""
MIN_MAX_RECORD_BYTES = 65536
"""The smallest limit a sink may set: room for the fields every record keeps."""
PREFIX_CHARS = 2048
"""Characters an offloaded text field keeps (as many as the event log keeps at `standard`)."""
OFFLOADED_FIELD = "offloaded"
"""The record field that maps each offloaded field (or `record`) to its media ref."""
TEXT_MIME = "text/plain; charset=utf-8"
JSON_MIME = "application/json"


def utf8_size(text: str) -> int:
    """The UTF-8 size of `text`, a lone surrogate counted as the 3 bytes it is written as."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def fits(text: str, max_bytes: int) -> bool:
    """Whether a record value of `text` is within `max_bytes` of UTF-8."""
    if len(text) > max_bytes:  # a character is at least one byte
        return False
    return 4 * len(text) <= max_bytes or utf8_size(text) <= max_bytes


def _dumps(record: dict[str, Any]) -> str:
    text = json.dumps(record, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, as DeadLetter.to_json does
        text = json.dumps(record)
    return text


class RecordOffload:
    """Keeps records within `max_bytes`, moving what does not fit to `store` (see the module)."""

    def __init__(self, store: MediaStore, max_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        if max_bytes < MIN_MAX_RECORD_BYTES:
            raise ValueError(f"max_bytes must be at least {MIN_MAX_RECORD_BYTES}, not {max_bytes}")
        self.store = store
        self.max_bytes = max_bytes

    def fits(self, text: str) -> bool:
        """Whether a record value of `text` is within the limit."""
        return fits(text, self.max_bytes)

    def keep_bytes(self, data: bytes, mime_type: str) -> dict[str, Any]:
        """Store `data` and return its ref as a record holds it."""
        return self.store.put(data, mime_type).model_dump(mode="json", exclude_none=True)

    def json_record(self, text: str) -> str:
        """`text` (one JSON record) as the sink writes it: itself when it fits, else bounded."""
        if self.fits(text):
            return text
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            return _dumps({OFFLOADED_FIELD: {"record": self._keep_text(text, JSON_MIME)}})
        offloaded = dict(record.get(OFFLOADED_FIELD) or {})
        bounded = dict(record)
        texts = sorted(
            (name for name, value in record.items() if isinstance(value, str)),
            key=lambda name: -len(record[name]),
        )
        for name in texts:
            if len(record[name]) <= PREFIX_CHARS:
                break
            if name not in offloaded:  # else a ref holds the field's original already
                offloaded[name] = self._keep_text(record[name], TEXT_MIME)
            bounded[name] = record[name][:PREFIX_CHARS]
            bounded[OFFLOADED_FIELD] = offloaded
            result = _dumps(bounded)
            if self.fits(result):
                return result
        offloaded["record"] = self._keep_text(text, JSON_MIME)
        scalars = {
            name: value
            for name, value in bounded.items()
            if not isinstance(value, dict | list) and name != OFFLOADED_FIELD
        }
        result = _dumps({**scalars, OFFLOADED_FIELD: offloaded})
        if self.fits(result):
            return result
        return _dumps({OFFLOADED_FIELD: offloaded})

    def _keep_text(self, text: str, mime_type: str) -> dict[str, Any]:
        return self.keep_bytes(text.encode("utf-8", "surrogatepass"), mime_type)
