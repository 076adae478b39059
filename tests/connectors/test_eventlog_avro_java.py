"""The event log against Apache Avro for Java 1.12 (the reference implementation).

Files of every shipped schema version, written by `EventLogWriter` with its default codec,
are read by Java with the reader schema of every version; each record Java resolves must
equal, field by field, what fastavro resolves under the same reader schema. A file Java
writes with our schema is read by `streamagents eventlog cat`, field by field equal to the
records it was given. Java does every case of this module in one JVM start (the `java`
fixture), and each test reads its own case's outcome, so a case still fails on its own and
names itself. Java runs as a separate process, so these tests are `e2e`.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest
from avro_java import JavaBatch, JavaCase
from maven_artifacts import resolve

from streamagents.connectors.eventlog import EventLogWriter, default_codec
from streamagents.connectors.media import MediaStore
from streamagents.jobs.cli.eventlog import _jsonable
from streamagents.jobs.cli.main import main
from streamagents.serde import avro_single_object as single_object
from streamagents.serde.avro import SCHEMA_VERSIONS, schema_json
from streamagents.serde.chat import GroundingSource, ServerToolEvidence, TokenUsage
from streamagents.serde.events import AgentEvent, EventType, new_event
from streamagents.serde.messages import ChatMessage, ImagePart, TextPart, ToolCall

pytestmark = pytest.mark.e2e


def events(media_dir: Path) -> list[AgentEvent]:
    """One event of every type, with text, a stored image, tool calls with metadata bytes,
    usage, latency, errors and attributes: every branch of the schema's unions."""
    store = MediaStore(str(media_dir))
    picture = ImagePart(mime_type="image/png", data=b"\x89PNG\r\n" + bytes(range(256)) * 4)
    ask = store.offload(ChatMessage.user([TextPart(text="Is this é broken?"), picture]), 0)
    call = ToolCall(
        id="c1",
        name="lookup_order",
        arguments={"order": "O-1", "nested": {"n": [1, 2.5, None, True]}},
        metadata={"signature": b"\x00\xff\x80sig", "trace": {"ids": [1, "two"]}},
    )
    answer = ChatMessage(
        role="assistant",
        parts=[TextPart(text="checking " + "long " * 600, metadata={"thought": b"\x01\x02"})],
        tool_calls=[call],
    )
    result = ChatMessage.tool_result("c1", "lookup_order", '{"status": "paid"}')
    ids = {"job_id": "interop", "key": "C-7", "run_id": "run-1"}
    kinds: dict[str, dict[str, Any]] = {
        # v8: the input line as received, longer than a standard log keeps (clipped)
        "input": {
            "messages": [ask],
            "input_record": json.dumps({"id": "T-1", "key": "C-7", "text": "é " * 1500}),
            "attributes": {"input_id": "T-1"},
        },
        "chat_request": {"messages": [ask], "model": "gemini-2.5-flash"},
        "chat_response": {
            "messages": [answer],
            "tool_calls": [call],
            "usage": TokenUsage(input_tokens=120, output_tokens=17, cached_tokens=100),
            "model": "gemini-2.5-flash",
            "latency_ms": 41.25,
            "finish_reason": "stop",
            "attempts": 2,
            "cost_usd": 0.00042,
            "answered_provider": "openai",
            "fallback": True,
        },
        "tool_request": {"tool_calls": [call]},
        "tool_response": {"tool_results": [result], "latency_ms": 3.0},
        "output": {
            "messages": [ChatMessage(role="assistant", parts=[TextPart(text="Paid.")])],
            "usage": TokenUsage(input_tokens=240, output_tokens=30),
            "latency_ms": 812.5,
            "attributes": {"status": "ok"},
        },
        "error": {"error_class": "RateLimited", "error_message": "429 from the provider"},
        "memory_trimmed": {"attributes": {"dropped": "4"}},
        "budget_exceeded": {"error_class": "BudgetExceeded", "error_message": "max_model_calls"},
        "server_tool": {
            "evidence": [
                ServerToolEvidence(
                    tool="google_search",
                    queries=["order O-1 status"],
                    sources=[GroundingSource(uri="https://example.org/o1", title="Order é")],
                ),
                ServerToolEvidence(
                    tool="code_execution",
                    language="PYTHON",
                    code="print(2)",
                    outcome="OUTCOME_OK",
                    output="2\n",
                ),
            ]
        },
        "context_cache": {"attributes": {"action": "evicted", "cache": "cachedContents/c1"}},
        # one attribute each: Java writes a map in its own key order, so a byte-for-byte
        # comparison needs maps of one entry
        "approval_requested": {"tool_calls": [call], "attributes": {"call_id": "run-1.0004"}},
        "approval_decided": {"tool_calls": [call], "attributes": {"decision": "approve"}},
        "approval_expired": {"tool_calls": [call], "attributes": {"deadline_ms": "1"}},
        "followup_scheduled": {"tool_calls": [call], "attributes": {"followup_id": "f-1"}},
        "followup_fired": {"attributes": {"followup_id": "f-1"}},
        "followup_cancelled": {"attributes": {"followup_id": "f-1"}},
        "budget_deferred": {"attributes": {"budget": "per_key.tokens"}},
    }
    assert set(kinds) == {t.value for t in EventType} - {"unknown"}
    return [
        new_event(kind, sequence=n, timestamp_ms=1_790_000_000_000 + n, **ids, **payload)
        for n, (kind, payload) in enumerate(kinds.items())
    ]


def written_file(directory: Path, version: int) -> Path:
    with EventLogWriter(directory / "log", level="standard", version=version) as writer:
        writer.write_all(events(directory / "media"))
    (path,) = writer.finished
    return path


def fastavro_read(path: Path, reader_schema: dict[str, Any]) -> list[dict[str, Any]]:
    with path.open("rb") as handle:
        return list(fastavro.reader(handle, reader_schema=fastavro.parse_schema(reader_schema)))


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Paths at which two decoded records differ (empty when equal field by field)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for name in sorted(set(expected) | set(actual)):
            if name not in expected or name not in actual:
                found.append(f"{where}.{name}: only in one")
            else:
                found += differences(expected[name], actual[name], f"{where}.{name}")
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} items vs {len(actual)}"]
        return [
            d
            for i, pair in enumerate(zip(expected, actual, strict=True))
            for d in differences(*pair, f"{where}[{i}]")
        ]
    return (
        []
        if expected == actual and type(expected) is type(actual)
        else [f"{where}: {expected!r} != {actual!r}"]
    )


ALL_PAIRS = list(itertools.product(SCHEMA_VERSIONS, SCHEMA_VERSIONS))
"""Every (written, reader) pair of schema versions."""


@pytest.fixture(scope="module")
def written_files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """A file of every schema version written by `EventLogWriter`, once for this module."""
    return {
        version: written_file(tmp_path_factory.mktemp(f"written-v{version}"), version)
        for version in SCHEMA_VERSIONS
    }


@dataclass(frozen=True)
class JavaCases:
    """What Avro Java made of every case of this module, one field per direction."""

    reads: dict[tuple[int, int], JavaCase[list[Any]]]
    """Our file of one version read with the reader schema of another, by (written, reader)."""
    writes: dict[int, JavaCase[Path]]
    """A file Java wrote with our schema of a version, holding that version's records."""
    decodes: dict[tuple[int, int], JavaCase[list[Any]]]
    """Our single-object messages of one version decoded to another, by (written, reader)."""
    encodes: dict[int, JavaCase[list[bytes]]]
    """A version's records encoded by Java as single-object messages."""


@pytest.fixture(scope="module")
def java(written_files: dict[int, Path], tmp_path_factory: pytest.TempPathFactory) -> JavaCases:
    """Every case of every direction, done by Avro Java in one JVM start for this module."""
    batch = JavaBatch(resolve("avro-java"), tmp_path_factory.mktemp("avro-java"))
    records = {v: fastavro_read(written_files[v], schema_json(v)) for v in SCHEMA_VERSIONS}
    writers = [schema_json(version) for version in SCHEMA_VERSIONS]
    cases = JavaCases(
        reads={
            (w, r): batch.read(f"v{w} file read as v{r}", written_files[w], schema_json(r))
            for w, r in ALL_PAIRS
        },
        writes={
            v: batch.write(f"v{v} file written", schema_json(v), records[v], codec="deflate")
            for v in SCHEMA_VERSIONS
        },
        decodes={
            (w, r): batch.decode_messages(
                f"v{w} messages decoded as v{r}",
                [single_object.encode(record, w) for record in records[w]],
                schema_json(r),
                writers,
            )
            for w, r in ALL_PAIRS
        },
        encodes={
            v: batch.encode_messages(f"v{v} messages encoded", schema_json(v), records[v])
            for v in SCHEMA_VERSIONS
        },
    )
    batch.run()
    return cases


@pytest.mark.parametrize("written,reader", ALL_PAIRS)
def test_fastavro_reads_every_version_with_every_reader_schema(
    tmp_path: Path, written: int, reader: int
) -> None:
    records = fastavro_read(written_file(tmp_path, written), schema_json(reader))
    assert len(records) == len(EventType) - 1
    known = {t.value for t in EventType}
    assert all(r["event_type"] in known for r in records)
    image = records[0]["payload"]["messages"][0]["parts"][1]
    assert image["size_bytes"] == 6 + 1024


def test_the_default_codec_is_one_java_reads_with_the_resolved_jars() -> None:
    assert default_codec() in ("zstandard", "deflate")


@pytest.mark.parametrize("written,reader", ALL_PAIRS)
def test_java_reads_every_version_with_every_reader_schema_as_fastavro_does(
    java: JavaCases, written_files: dict[int, Path], written: int, reader: int
) -> None:
    by_java = java.reads[written, reader].result()
    by_fastavro = fastavro_read(written_files[written], schema_json(reader))
    assert len(by_java) == len(by_fastavro) == len(EventType) - 1
    for java_record, python_record in zip(by_java, by_fastavro, strict=True):
        assert differences(python_record, java_record) == [], java_record["event_type"]
    assert [r["event_type"] for r in by_java] == [r["event_type"] for r in by_fastavro]
    image = by_java[0]["payload"]["messages"][0]["parts"][1]
    assert image["size_bytes"] == 6 + 1024  # the stored image's ref, never its bytes


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_eventlog_cat_reads_a_file_java_wrote_with_our_schema(
    java: JavaCases,
    written_files: dict[int, Path],
    capsys: pytest.CaptureFixture[str],
    version: int,
) -> None:
    ours = fastavro_read(written_files[version], schema_json(version))
    java_file = java.writes[version].result()
    assert java_file.read_bytes().startswith(b"Obj\x01")
    assert main(["eventlog", "cat", "--json", "--version", str(version), str(java_file)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = [json.loads(json.dumps(_jsonable(record), ensure_ascii=False)) for record in ours]
    assert len(printed) == len(expected) == len(EventType) - 1
    for shown, record in zip(printed, expected, strict=True):
        assert differences(record, shown) == [], shown["event_type"]
    assert main(["eventlog", "cat", str(java_file)]) == 0
    assert capsys.readouterr().out.count("key=C-7") == len(expected)


@pytest.mark.parametrize("written,reader", ALL_PAIRS)
def test_java_decodes_our_single_object_messages_to_every_version(
    java: JavaCases, written_files: dict[int, Path], written: int, reader: int
) -> None:
    records = fastavro_read(written_files[written], schema_json(written))
    messages = [single_object.encode(record, written) for record in records]
    by_java = java.decodes[written, reader].result()
    ours = [single_object.decode(message, reader) for message in messages]
    assert len(by_java) == len(ours) == len(EventType) - 1
    for java_record, python_record in zip(by_java, ours, strict=True):
        assert differences(python_record, java_record) == [], java_record["event_type"]


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_single_object_messages_java_encodes_are_the_bytes_we_encode(
    java: JavaCases, written_files: dict[int, Path], version: int
) -> None:
    records = fastavro_read(written_files[version], schema_json(version))
    by_java = java.encodes[version].result()
    assert by_java == [single_object.encode(record, version) for record in records]
    for message, record in zip(by_java, records, strict=True):
        assert single_object.writer_version(message) == version
        assert differences(record, single_object.decode(message, version)) == []
