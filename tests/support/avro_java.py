"""Apache Avro for Java, driven from the tests: cases are collected in a `JavaBatch`, then
`java/AvroInterop.java` does them all in one JVM start (run from source against the jars
`maven_artifacts.resolve("avro-java")` resolved) and reports on each case in its own file;
records cross in Avro's JSON encoding."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import fastavro

__all__ = ["JavaBatch", "JavaCase"]

_SOURCE = Path(__file__).resolve().parent / "java" / "AvroInterop.java"

T = TypeVar("T")


class JavaCase(Generic[T]):
    """One case of a batch: what Java made of it, read once the batch has run."""

    def __init__(self, name: str, command: str, work: Path, output: Callable[[], T]) -> None:
        self.name = name
        self.command = command
        self.outcome = work / "java-outcome.txt"
        self._output = output

    def result(self) -> T:
        """The case's output as Python values; an AssertionError naming the case when Java
        failed on it (with Java's stack trace) or never reached it."""
        if not self.outcome.is_file():
            raise AssertionError(f"Avro Java never reported on {self.command} ({self.name})")
        outcome = self.outcome.read_text(encoding="utf-8")
        if outcome != "ok\n":
            trace = outcome.removeprefix("failed\n")[-4000:]
            raise AssertionError(f"Avro Java {self.command} failed ({self.name}):\n{trace}")
        return self._output()


class JavaBatch:
    """Reads, writes, decodes and encodes for Avro Java, collected case by case and then done
    in one JVM start by `run()`; each case gets a folder of its own under `work`."""

    def __init__(self, jars_dir: Path, work: Path) -> None:
        self.classpath = f"{jars_dir}/*"
        self.work = work
        self._plan: list[list[str]] = []

    def read(self, name: str, file: Path, reader_schema: dict[str, Any]) -> JavaCase[list[Any]]:
        """The records of `file` as Java resolves them to `reader_schema`, decoded into
        Python values (as fastavro gives them) from Java's JSON encoding."""
        work = self._folder(name)
        schema_file, out = work / "reader.avsc", work / "java-read.jsonl"
        schema_file.write_text(json.dumps(reader_schema))
        command = ["read", str(file), str(schema_file), str(out)]
        return self._add(name, work, command, lambda: _json_records(out, reader_schema))

    def write(
        self, name: str, schema: dict[str, Any], records: list[Any], codec: str = "deflate"
    ) -> JavaCase[Path]:
        """A container file written by Java with `schema` and `codec`, holding `records`."""
        work = self._folder(name)
        schema_file, source, target = (
            work / "writer.avsc",
            work / "java-write.jsonl",
            work / "java-events.avro",
        )
        schema_file.write_text(json.dumps(schema))
        _write_json_records(source, schema, records)
        command = ["write", str(schema_file), str(source), str(target), codec]
        return self._add(name, work, command, lambda: target)

    def decode_messages(
        self,
        name: str,
        messages: list[bytes],
        reader_schema: dict[str, Any],
        writers: list[dict[str, Any]],
    ) -> JavaCase[list[Any]]:
        """Single-object messages as Java's `BinaryMessageDecoder` resolves them to
        `reader_schema`, knowing the `writers` schemas, decoded into Python values."""
        work = self._folder(name)
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
        command = ["decode-messages", str(source), str(schema_file), str(out), *writer_files]
        return self._add(name, work, command, lambda: _json_records(out, reader_schema))

    def encode_messages(
        self, name: str, schema: dict[str, Any], records: list[Any]
    ) -> JavaCase[list[bytes]]:
        """`records` as single-object messages written by Java's `BinaryMessageEncoder`."""
        work = self._folder(name)
        schema_file, source, out = (
            work / "writer.avsc",
            work / "java-encode.jsonl",
            work / "java.hex",
        )
        schema_file.write_text(json.dumps(schema))
        _write_json_records(source, schema, records)
        command = ["encode-messages", str(schema_file), str(source), str(out)]
        return self._add(
            name, work, command, lambda: [bytes.fromhex(line) for line in out.read_text().split()]
        )

    def run(self) -> None:
        """Every case collected so far, in one JVM; a failure of the run itself (not of a
        case, which its own outcome reports) raises with Java's error output."""
        plan = self.work / "plan.tsv"
        plan.write_text("".join("\t".join(fields) + "\n" for fields in self._plan))
        result = subprocess.run(
            ["java", "-cp", self.classpath, str(_SOURCE), str(plan)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"Avro Java failed to run its plan:\n{result.stderr[-4000:]}")

    def _folder(self, name: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
        folder = self.work / f"{len(self._plan):03d}-{slug}"
        folder.mkdir(parents=True)
        return folder

    def _add(
        self, name: str, work: Path, command: list[str], output: Callable[[], T]
    ) -> JavaCase[T]:
        case = JavaCase(name, command[0], work, output)
        fields = [str(case.outcome), *command]
        if any("\t" in field or "\n" in field for field in fields):
            raise ValueError(f"a path with a tab or a newline can't go in the plan: {fields}")
        self._plan.append(fields)
        return case


def _write_json_records(path: Path, schema: dict[str, Any], records: list[Any]) -> None:
    with path.open("w") as lines:
        fastavro.json_writer(lines, fastavro.parse_schema(schema), records)


def _json_records(path: Path, schema: dict[str, Any]) -> list[Any]:
    with path.open() as lines:
        return list(fastavro.json_reader(lines, fastavro.parse_schema(schema)))
