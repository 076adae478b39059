"""Java artifacts the tests run (the Kafka broker, Apache Avro for Java), resolved with Maven.

Each set is a small POM in `tests/support/maven/<name>/`; `resolve(name)` copies its jars
and their dependencies (`mvn dependency:copy-dependencies`) into a cache folder named after
the POM's digest, once: a changed POM resolves into a new folder. The cache is
`$STREAMAGENTS_TEST_CACHE` or `~/.cache/streamagents/test-artifacts`. Standard library only,
so `.ci/run` can resolve every set before the venv exists: `python3 maven_artifacts.py`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["ARTIFACT_SETS", "cache_root", "resolve"]

_POMS = Path(__file__).resolve().parent / "maven"
ARTIFACT_SETS = tuple(sorted(p.name for p in _POMS.iterdir() if (p / "pom.xml").is_file()))
_DONE = ".resolved"


def cache_root() -> Path:
    """The folder the resolved sets live in."""
    configured = os.environ.get("STREAMAGENTS_TEST_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "streamagents" / "test-artifacts"


def resolve(name: str, timeout_s: float = 900.0) -> Path:
    """The folder holding set `name`'s jars, resolving them with Maven when not cached."""
    pom = _POMS / name / "pom.xml"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    target = cache_root() / f"{name}-{digest}"
    if (target / _DONE).is_file():
        return target
    if shutil.which("mvn") is None:
        raise RuntimeError("Maven (mvn) is not installed: `apt-get install maven` (see .ci/run)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        result = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mvn could not resolve {pom}:\n{result.stdout[-4000:]}")
        (staging / _DONE).write_text(digest)
        if target.exists():  # another process finished first
            shutil.rmtree(staging)
        else:
            staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


if __name__ == "__main__":
    for artifact_set in sys.argv[1:] or ARTIFACT_SETS:
        print(f"{artifact_set}: {resolve(artifact_set)}")
