"""Avro binary encoding of event-log records, compiled once per schema version.

fastavro's generic writer walks the schema for every record (about 30 µs for a small
event, the largest share of an event's cost in the log); `RecordEncoder` turns a schema into
functions once (one generated function per record type, its fields inline), so a record
costs a few µs. It takes records as
`to_record` builds them (a union value is `None`, a `(branch name, value)` pair, or a
boolean, number, string or bytes) and gives exactly the bytes fastavro's
`schemaless_writer` gives for them; a record it cannot encode (a union value of another
kind, a missing field) is handed to fastavro. Files stay fastavro's: the event log writer
hands it whole blocks of encoded records (`Writer.write_block`).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro

__all__ = ["RecordEncoder"]

_Write = Callable[[bytearray, Any], None]
_DOUBLE = struct.Struct("<d").pack


def _long(out: bytearray, value: int) -> None:
    """A zigzag varint, as Avro encodes `int` and `long`."""
    if 0 <= value < 64:  # one byte: most lengths, counts and indexes
        out.append(value << 1)
        return
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _string(out: bytearray, value: str) -> None:
    data = value.encode()
    size = len(data)
    if size < 64:
        out.append(size << 1)
    else:
        _long(out, size)
    out += data


def _bytes(out: bytearray, value: bytes) -> None:
    _long(out, len(value))
    out += value


def _double(out: bytearray, value: float) -> None:
    out += _DOUBLE(value)


def _boolean(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def _null(out: bytearray, value: None) -> None:
    if value is not None:
        raise TypeError(f"null expected, not {type(value).__name__}")


_PRIMITIVES: dict[str, _Write] = {
    "null": _null,
    "boolean": _boolean,
    "int": _long,
    "long": _long,
    "double": _double,
    "bytes": _bytes,
    "string": _string,
}

# The branch a plain (not tuple-notation) union value of exactly one of these types takes:
# the first branch of its kind, as fastavro picks the first branch the value validates
# against. Values of other types (subclasses, an int for a double) are left to fastavro.
_PLAIN_BRANCHES: dict[type, tuple[str, ...]] = {
    bool: ("boolean",),
    int: ("long", "int"),
    float: ("double",),
    str: ("string",),
    bytes: ("bytes",),
}


class _Unsupported(Exception):
    """A value this encoder does not resolve; fastavro encodes the record instead."""


class _Compiler:
    """Builds the writer function of each schema node, resolving named types."""

    def __init__(self) -> None:
        self.named: dict[str, _Write] = {}

    def compile(self, schema: Any, namespace: str) -> _Write:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema]
            name = schema if "." in schema else f"{namespace}.{schema}"
            if name in self.named:  # defined earlier, as Avro requires
                return self.named[name]
            return lambda out, value: self.named[name](out, value)  # a record's own name
        if isinstance(schema, list):
            return self._union(schema, namespace)
        kind = schema["type"]
        if kind == "record":
            return self._record(schema, namespace)
        if kind == "enum":
            index = {symbol: i for i, symbol in enumerate(schema["symbols"])}
            return self._register(schema, namespace, lambda out, value: _long(out, index[value]))
        if kind == "array":
            return self._array(self.compile(schema["items"], namespace))
        if kind == "map":
            return self._map(self.compile(schema["values"], namespace))
        if kind in _PRIMITIVES:  # {"type": "long", "logicalType": "timestamp-millis"}, ...
            return _PRIMITIVES[kind]
        raise ValueError(f"avro binary: unsupported schema type {kind!r}")

    def _full_name(self, schema: dict[str, Any], namespace: str) -> str:
        name = schema["name"]
        return name if "." in name else f"{schema.get('namespace', namespace)}.{name}"

    def _register(self, schema: dict[str, Any], namespace: str, write: _Write) -> _Write:
        self.named[self._full_name(schema, namespace)] = write
        return write

    def _record(self, schema: dict[str, Any], namespace: str) -> _Write:
        """One generated function per record type: each field inline, where a null, an
        empty array or map and a string cost no call (most of an event's fields)."""
        full = self._full_name(schema, namespace)
        inner = full.rpartition(".")[0]
        self.named[full] = lambda out, value: self.named[full](out, value)  # recursive refs
        scope: dict[str, Any] = {"_long": _long, "_Unsupported": _Unsupported}
        body = []
        for index, field in enumerate(schema["fields"]):
            kind = field["type"]
            scope[f"w{index}"] = self.compile(kind, inner)
            body.append(f"x = value[{field['name']!r}]")
            if isinstance(kind, dict) and kind["type"] in ("array", "map"):
                body.append(f"w{index}(out, x) if x else out.append(0)")
            elif isinstance(kind, list) and len(kind) == 2 and kind[0] == "null":
                body.append(f"out.append(0) if x is None else w{index}(out, x)")
            elif kind == "string":
                body += [
                    "data = x.encode()",
                    "size = len(data)",
                    "out.append(size << 1) if size < 64 else _long(out, size)",
                    "out += data",
                ]
            else:
                body.append(f"w{index}(out, x)")
        source = "\n".join(
            [
                "def write(out, value):",
                "    try:",
                *(f"        {line}" for line in body or ["pass"]),
                "    except KeyError as missing:",
                f"        raise _Unsupported(f'{full}: no field {{missing}}') from None",
            ]
        )
        exec(compile(source, f"<avro record {full}>", "exec"), scope)
        write: _Write = scope["write"]
        self.named[full] = write
        return write

    def _union(self, branches: list[Any], namespace: str) -> _Write:
        by_name: dict[str, tuple[int, _Write]] = {}
        for index, branch in enumerate(branches):
            if isinstance(branch, dict):
                name = self._full_name(branch, namespace) if "name" in branch else branch["type"]
            else:
                name = branch if branch in _PRIMITIVES or "." in branch else f"{namespace}.{branch}"
            by_name[name] = (index, self.compile(branch, namespace))
        null = by_name.get("null", (None, _null))[0]
        plain = {
            kind: found
            for kind, names in _PLAIN_BRANCHES.items()
            if (found := next((by_name[n] for n in names if n in by_name), None)) is not None
        }
        if null == 0 and len(branches) == 2:  # ["null", X]: the most common union by far
            name = next(n for n in by_name if n != "null")
            other = by_name[name][1]
            other_plain = next((kind for kind, found in plain.items() if found[0] == 1), None)

            def write_optional(out: bytearray, value: Any) -> None:
                if value is None:
                    out.append(0)
                elif type(value) is tuple and value[0] == name:
                    out.append(2)
                    other(out, value[1])
                elif type(value) is other_plain:
                    out.append(2)
                    other(out, value)
                else:
                    raise _Unsupported(f"union value {value!r:.40}")

            return write_optional

        def write(out: bytearray, value: Any) -> None:
            if value is None and null is not None:
                out.append(null * 2)  # zigzag of a small index
                return
            kind = type(value)
            if kind is tuple:
                found = by_name.get(value[0])
                if found is None:
                    raise _Unsupported(f"union has no branch {value[0]!r}")
                _long(out, found[0])
                found[1](out, value[1])
                return
            found = plain.get(kind)
            if found is None:
                raise _Unsupported(f"union value of type {kind.__name__}")
            _long(out, found[0])
            found[1](out, value)

        return write

    @staticmethod
    def _array(item: _Write) -> _Write:
        def write(out: bytearray, value: list[Any]) -> None:
            if value:
                _long(out, len(value))
                for element in value:
                    item(out, element)
            out.append(0)

        return write

    @staticmethod
    def _map(item: _Write) -> _Write:
        def write(out: bytearray, value: dict[str, Any]) -> None:
            if value:
                _long(out, len(value))
                for key, element in value.items():
                    _string(out, key)
                    item(out, element)
            out.append(0)

        return write


class RecordEncoder:
    """Encodes records of one Avro schema (as JSON) to Avro binary, like fastavro does."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._write = _Compiler().compile(schema, schema.get("namespace", ""))
        self._parsed = fastavro.parse_schema(schema)

    def encode_into(self, out: bytearray, record: dict[str, Any]) -> None:
        """Append the encoding of `record` to `out`; on an error `out` is left unchanged."""
        start = len(out)
        try:
            self._write(out, record)
        except Exception:
            del out[start:]
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, self._parsed, record)  # raises if invalid
            out += buffer.getvalue()

    def encode(self, record: dict[str, Any]) -> bytes:
        """The Avro binary encoding of `record`."""
        out = bytearray()
        self.encode_into(out, record)
        return bytes(out)
