"""Avro single-object encoding of event-log records, for the event log on a Kafka topic.

Each message is the two-byte marker `C3 01`, the 8-byte little-endian CRC-64-AVRO
fingerprint of the writer schema's Parsing Canonical Form, and the record in Avro binary
(the Avro specification's "single object encoding"). A consumer looks the fingerprint up
among the shipped schema versions and resolves the record to the version it reads.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
from fastavro.schema import fingerprint as _fingerprint
from fastavro.schema import to_parsing_canonical_form

from streamagents.serde.avro import LATEST_VERSION, SCHEMA_VERSIONS, parsed_schema, schema_json

__all__ = ["MARKER", "UnknownSchema", "decode", "encode", "fingerprint", "writer_version"]

MARKER = b"\xc3\x01"


class UnknownSchema(ValueError):
    """A message that is not single-object encoded, or whose schema is not a shipped one."""


def fingerprint(version: int) -> bytes:
    """The 8-byte header fingerprint of schema `version` (CRC-64-AVRO, little-endian)."""
    canonical = to_parsing_canonical_form(schema_json(version))
    # fastavro spells the fingerprint's bytes in little-endian order already (Avro Java's
    # BinaryMessageEncoder writes the same header: tests/connectors/test_eventlog_avro_java.py).
    return bytes.fromhex(_fingerprint(canonical, "CRC-64-AVRO"))


_VERSION_OF = {fingerprint(version): version for version in SCHEMA_VERSIONS}


def encode(record: dict[str, Any], version: int = LATEST_VERSION) -> bytes:
    """`record` (as `to_record` gives it for `version`) as one single-object message."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, parsed_schema(version), record)
    return MARKER + fingerprint(version) + body.getvalue()


def writer_version(message: bytes) -> int:
    """The schema version a message was written with, from its fingerprint."""
    if len(message) < 10 or message[:2] != MARKER:
        raise UnknownSchema("not an Avro single-object message (no C3 01 marker)")
    version = _VERSION_OF.get(message[2:10])
    if version is None:
        raise UnknownSchema(
            f"schema fingerprint {message[2:10].hex()} is not one of the shipped event-log "
            f"versions {list(SCHEMA_VERSIONS)}"
        )
    return version


def decode(message: bytes, version: int = LATEST_VERSION) -> dict[str, Any]:
    """A message's record resolved to schema `version` (the newest by default)."""
    written = writer_version(message)
    return fastavro.schemaless_reader(
        io.BytesIO(message[10:]), parsed_schema(written), parsed_schema(version)
    )
