"""Connector jars: fetched from a Maven repository (here a directory served on 127.0.0.1),
kept only when both checksums match, found in the cache afterwards."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamagents.connectors import connector_jars
from streamagents.connectors.connector_jars import (
    ConnectorJar,
    JarFetchError,
    cache_dir,
    cached_jar,
    connector_jar,
    fetch_jar,
)
from streamagents.jobs.cli.main import main

JAR_BYTES = b"PK\x03\x04 not really a jar, but bytes with a known digest"
FLINK = "9.9.1"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Requests are not logged."""


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A Maven repository layout on 127.0.0.1 holding one jar and its .sha1, a connector
    table entry for Flink 9.9 naming it, and an empty jar cache."""
    root = tmp_path / "repo"
    jar = ConnectorJar(
        group="org.example.flink",
        artifact="flink-sql-connector-kafka",
        version="1.0.0-9.9",
        sha256=hashlib.sha256(JAR_BYTES).hexdigest(),
    )
    folder = root / "org" / "example" / "flink" / jar.artifact / jar.version
    folder.mkdir(parents=True)
    (folder / jar.filename).write_bytes(JAR_BYTES)
    (folder / f"{jar.filename}.sha1").write_text(hashlib.sha1(JAR_BYTES).hexdigest() + "\n")
    monkeypatch.setitem(connector_jars.CONNECTORS, "9.9", {"kafka": jar})
    monkeypatch.setenv("STREAMAGENTS_JAR_CACHE", str(tmp_path / "cache"))
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder / jar.filename
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_downloads_verifies_and_caches_the_jar(repository: tuple[str, Path]) -> None:
    url, _ = repository
    assert cached_jar("kafka", FLINK) is None
    path = fetch_jar("kafka", flink=FLINK, repository=url)
    assert path == cache_dir() / "flink-sql-connector-kafka-1.0.0-9.9.jar"
    assert path.read_bytes() == JAR_BYTES
    assert cached_jar("kafka", FLINK) == path
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_cached_jar_is_not_downloaded_again(repository: tuple[str, Path]) -> None:
    url, served = repository
    first = fetch_jar("kafka", flink=FLINK, repository=url)
    served.unlink()
    assert fetch_jar("kafka", flink=FLINK, repository=url) == first


def test_a_jar_whose_sha256_differs_is_refused_and_not_kept(
    repository: tuple[str, Path],
) -> None:
    url, served = repository
    served.write_bytes(JAR_BYTES + b"tampered")
    with pytest.raises(JarFetchError, match=r"SHA-256 is [0-9a-f]{64}, expected"):
        fetch_jar("kafka", flink=FLINK, repository=url)
    assert cached_jar("kafka", FLINK) is None
    assert not cache_dir().exists() or not list(cache_dir().iterdir())


def test_a_jar_whose_published_sha1_differs_is_refused(repository: tuple[str, Path]) -> None:
    url, served = repository
    Path(f"{served}.sha1").write_text("0" * 40)
    with pytest.raises(JarFetchError, match="SHA-1 does not match"):
        fetch_jar("kafka", flink=FLINK, repository=url)
    assert cached_jar("kafka", FLINK) is None


def test_a_missing_jar_names_the_url_and_status(repository: tuple[str, Path]) -> None:
    url, served = repository
    served.unlink()
    with pytest.raises(JarFetchError, match=r"flink-sql-connector-kafka-1.0.0-9.9.jar: HTTP 404"):
        fetch_jar("kafka", flink=FLINK, repository=url)


def test_unknown_flink_versions_and_connectors_are_named() -> None:
    with pytest.raises(JarFetchError, match=r"no connector jars are known for Flink 1.17.0"):
        connector_jar("kafka", "1.17.0")
    with pytest.raises(JarFetchError, match=r"unknown connector 'pulsar' \(known: kafka\)"):
        connector_jar("pulsar")


def test_the_installed_flink_has_a_pinned_kafka_connector() -> None:
    jar = connector_jar("kafka")
    assert jar.filename == "flink-sql-connector-kafka-5.0.0-2.2.jar"
    assert jar.url().endswith(
        "/org/apache/flink/flink-sql-connector-kafka/5.0.0-2.2/"
        "flink-sql-connector-kafka-5.0.0-2.2.jar"
    )


def test_cli_fetch_prints_the_path_and_path_finds_it(
    repository: tuple[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _ = repository
    monkeypatch.setattr(connector_jars, "flink_version", lambda: FLINK)
    assert main(["jars", "path", "kafka"]) == 1
    assert "run `streamagents jars fetch kafka`" in capsys.readouterr().err
    assert main(["jars", "fetch", "kafka", "--repository", url]) == 0
    printed = capsys.readouterr().out.strip()
    assert Path(printed).read_bytes() == JAR_BYTES
    assert main(["jars", "path", "kafka"]) == 0
    assert capsys.readouterr().out.strip() == printed


def test_cli_fetch_failure_exits_1_with_the_reason(
    repository: tuple[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, served = repository
    served.write_bytes(b"other bytes")
    monkeypatch.setattr(connector_jars, "flink_version", lambda: FLINK)
    assert main(["jars", "fetch", "kafka", "--repository", url]) == 1
    assert "cannot fetch the kafka connector jar" in capsys.readouterr().err
