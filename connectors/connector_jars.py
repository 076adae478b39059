"""Flink connector jars (the PyFlink wheel ships none), fetched from Maven Central into a cache.

For each Flink minor version a table names the connector build known to work with it and
the SHA-256 of its jar. `fetch_jar("kafka")` downloads that jar, checks it against the
pinned digest and against the SHA-1 the repository publishes beside it, and moves it into
the cache only when both match; `cached_jar("kafka")` finds it there. The cache is
`$STREAMAGENTS_JAR_CACHE`, else `$XDG_CACHE_HOME/streamagents/jars`, else
`~/.cache/streamagents/jars`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = [
    "CONNECTORS",
    "MAVEN_CENTRAL",
    "ConnectorJar",
    "JarFetchError",
    "cache_dir",
    "cached_jar",
    "connector_jar",
    "fetch_jar",
    "flink_version",
]

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class ConnectorJar:
    """One connector jar in a Maven repository, with the SHA-256 it must have."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        """The jar's file name, as in the repository and the cache."""
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str = MAVEN_CENTRAL) -> str:
        """Where the jar lives in `repository`."""
        group_path = self.group.replace(".", "/")
        return f"{repository}/{group_path}/{self.artifact}/{self.version}/{self.filename}"


CONNECTORS: dict[str, dict[str, ConnectorJar]] = {
    # Flink "major.minor" -> connector name -> jar. No build for Flink 2.3 is published;
    # 5.0.0-2.2, the newest (built against Flink 2.2), runs the Kafka end-to-end tests on
    # apache-flink 2.3.0. 4.0.1-2.0 also read and wrote a topic in a trial run.
    "2.3": {
        "kafka": ConnectorJar(
            group="org.apache.flink",
            artifact="flink-sql-connector-kafka",
            version="5.0.0-2.2",
            sha256="5605c691d11a501382c383fecba37a7a552467da5ab7ba904ef5d6f3d62c5616",
        ),
    },
}


class JarFetchError(RuntimeError):
    """A connector jar could not be named, downloaded or verified; the message says which."""


def flink_version() -> str:
    """The installed apache-flink version, e.g. `2.3.0`."""
    try:
        return version("apache-flink")
    except PackageNotFoundError:
        raise JarFetchError("apache-flink is not installed") from None


def connector_jar(name: str, flink: str | None = None) -> ConnectorJar:
    """The jar of connector `name` for Flink version `flink` (default: the installed one)."""
    flink = flink or flink_version()
    minor = ".".join(flink.split(".")[:2])
    known = CONNECTORS.get(minor)
    if known is None:
        raise JarFetchError(
            f"no connector jars are known for Flink {flink} "
            f"(known: Flink {', '.join(sorted(CONNECTORS))})"
        )
    if name not in known:
        raise JarFetchError(f"unknown connector {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def cache_dir() -> Path:
    """The folder fetched jars are kept in."""
    configured = os.environ.get("STREAMAGENTS_JAR_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "streamagents" / "jars"


def cached_jar(name: str, flink: str | None = None) -> Path | None:
    """The cached jar of connector `name` for the installed Flink, or None if not fetched."""
    path = cache_dir() / connector_jar(name, flink).filename
    return path if path.is_file() else None


def _download(url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return bytes(reply.read())
    except urllib.error.HTTPError as exc:
        raise JarFetchError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise JarFetchError(f"{url}: cannot download ({reason})") from None


def fetch_jar(
    name: str,
    *,
    flink: str | None = None,
    repository: str = MAVEN_CENTRAL,
    timeout_s: float = 120.0,
) -> Path:
    """Download connector `name`'s jar into the cache unless it is there; returns its path.

    The jar is written to the cache only after its SHA-256 matches the pinned digest and
    its SHA-1 matches the repository's `.sha1` file; a mismatch raises `JarFetchError`."""
    jar = connector_jar(name, flink)
    target = cache_dir() / jar.filename
    if target.is_file():
        return target
    url = jar.url(repository)
    data = _download(url, timeout_s)
    sha256 = hashlib.sha256(data).hexdigest()
    if sha256 != jar.sha256:
        raise JarFetchError(
            f"{url}: SHA-256 is {sha256}, expected {jar.sha256}; the file was not kept"
        )
    published = _download(url + ".sha1", timeout_s).decode("ascii", "replace").split()
    sha1 = hashlib.sha1(data).hexdigest()
    if not published or published[0].lower() != sha1:
        raise JarFetchError(f"{url}: SHA-1 does not match the published .sha1; not kept")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".part", delete=False) as part:
        part.write(data)
    Path(part.name).replace(target)
    return target
