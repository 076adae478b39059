"""Apache Avro for Java, driven from the tests: `java/AvroInterop.java` compiled against the
jars `maven_artifacts.resolve("avro-java")` resolved; records cross in Avro's JSON encoding."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import fastavro

__all__ = ["AvroJava"]

_SOURCE = Path(__file__).resolve().parent / "java" / "AvroInterop.java"


class AvroJava:
    """The compiled reader/writer and the classpath to run it with."""

    def __init__(self, jars_dir: Path, build_dir: Path) -> None:
        self.classpath = f"{build_dir}:{jars_dir}/*"
        build_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-d", str(build_dir), "-cp", f"{jars_dir}/*", str(_SOURCE)],
            check=True,
            capture_output=True,
            timeout=180,
        )

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            ["java", "-cp", self.classpath, "AvroInterop", *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"Avro Java {args[0]} failed:\n{result.stderr[-4000:]}")

    def read(self, file: Path, reader_schema: dict[str, Any], work: Path) -> list[Any]:
        """The records of `file` as Java resolves them to `reader_schema`, decoded into
        Python values (as fastavro gives them) from Java's JSON encoding."""
        schema_file, out = work / "reader.avsc", work / "java-read.jsonl"
        schema_file.write_text(json.dumps(reader_schema))
        self._run("read", str(file), str(schema_file), str(out))
        parsed = fastavro.parse_schema(reader_schema)
        with out.open() as lines:
            return list(fastavro.json_reader(lines, parsed))

    def write(
        self, schema: dict[str, Any], records: list[Any], target: Path, codec: str = "deflate"
    ) -> None:
        """A container file written by Java with `schema` and `codec`, holding `records`."""
        work = target.parent
        schema_file, source = work / "writer.avsc", work / "java-write.jsonl"
        schema_file.write_text(json.dumps(schema))
        with source.open("w") as lines:
            fastavro.json_writer(lines, fastavro.parse_schema(schema), records)
        self._run("write", str(schema_file), str(source), str(target), codec)

    def decode_messages(
        self,
        messages: list[bytes],
        reader_schema: dict[str, Any],
        writers: list[dict[str, Any]],
        work: Path,
    ) -> list[Any]:
        """Single-object messages as Java's `BinaryMessageDecoder` resolves them to
        `reader_schema`, knowing the `writers` schemas, decoded into Python values."""
        source, schema_file, out = (
            work / "messages.hex",
            work / "reader.avsc",
            work / "java-decoded.jsonl",
        )
        source.write_text("".join(message.hex() + "\n" for message in messages))
        schema_file.write_text(json.dumps(reader_schema))
        writer_files = []
        for index, writer in enumerate(writers):
            writer_file = work / f"writer-{index}.avsc"
            writer_file.write_text(json.dumps(writer))
            writer_files.append(str(writer_file))
        self._run("decode-messages", str(source), str(schema_file), str(out), *writer_files)
        with out.open() as lines:
            return list(fastavro.json_reader(lines, fastavro.parse_schema(reader_schema)))

    def encode_messages(
        self, schema: dict[str, Any], records: list[Any], work: Path
    ) -> list[bytes]:
        """`records` as single-object messages written by Java's `BinaryMessageEncoder`."""
        schema_file, source, out = (
            work / "writer.avsc",
            work / "java-encode.jsonl",
            work / "java.hex",
        )
        schema_file.write_text(json.dumps(schema))
        with source.open("w") as lines:
            fastavro.json_writer(lines, fastavro.parse_schema(schema), records)
        self._run("encode-messages", str(schema_file), str(source), str(out))
        return [bytes.fromhex(line) for line in out.read_text().split()]
