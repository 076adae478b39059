"""The JVM of `run`'s local mini-cluster, started while the command is still doing Python work.

`streamagents run` spends its first seconds in Python (importing the command line, checking
the spec, building the job graph) and needs PyFlink's gateway JVM only when it builds the
graph; launching that JVM takes about as long again. `start_in_background` starts the
launch on a daemon thread before the command's own imports, so the two overlap: PyFlink
guards its gateway with a lock, so whoever asks for it next waits for this launch, and if
the launch failed (no Java), asks again and gets the error in the usual place.

The JVM runs with its quick compiler only (`quick_compiler`): a local run is short and its
Java side light (the agents' work is Python and network), and the optimising compiler
alone spent about 11 of the example's 44 s of CPU.

The JVM maps the classes it loaded in an earlier run from a class archive (`class_archive`,
Java's application class-data sharing): loading and verifying Flink's classes anew was
about 1.4 s of a bare job's 7 s of CPU. The first run on a machine (per Java and Flink
installation) writes the archive when its JVM exits, to a temporary file that a small
watcher process renames into place once that JVM is gone, so no run maps a half-written
archive; later runs use it.

PyFlink starts a loopback server for process-mode Python workers whenever a local
environment is created, importing Apache Beam's worker for it (about 1.1 s of CPU on the
client's path to the job); `run`'s jobs run their Python in thread mode, inside the
TaskManager, and never call it, so `start_in_background` tells PyFlink to skip it
(`NO_LOOPBACK_SERVER`).

This module imports nothing heavy (only PyFlink's gateway module), so that it can run first.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

__all__ = [
    "NO_LOOPBACK_SERVER",
    "QUICK_COMPILER",
    "ClassArchive",
    "class_archive",
    "interpreter_first",
    "quick_compiler",
    "start_in_background",
]

QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
"""The JVM option that keeps to the C1 compiler: compiled sooner, for a fraction of the
CPU, to code that runs somewhat slower; C2 pays off only in long, Java-heavy runs."""


NO_LOOPBACK_SERVER = ("_python_worker_execution_mode", "process")
"""The environment variable (and value) with which PyFlink's `StreamExecutionEnvironment`
starts no loopback server: process-mode workers, if any, are then started by the JVM."""


def interpreter_first(path: str | None) -> str:
    """`path` (a PATH value) with this interpreter's directory first, once.

    Flink's thread-mode workers run the `python` they find on PATH, not the interpreter
    that started the job (setting `python.executable` instead fails with "No module named
    'pemja'"): with a venv not activated, they find another Python, or none ("Failed to
    find libpython"). `sys.executable` is not resolved, so a venv's `bin` is what comes
    first, not the base Python its `python` links to."""
    first = str(Path(sys.executable).parent)
    rest = [entry for entry in (path or "").split(os.pathsep) if entry and entry != first]
    return os.pathsep.join([first, *rest])


def quick_compiler(jvm_args: str | None) -> str:
    """`jvm_args` (a `JVM_ARGS` value, which PyFlink passes to the JVM it launches) with
    `QUICK_COMPILER` added, unless it already chooses the JVM's compilers (set
    `JVM_ARGS=-XX:TieredStopAtLevel=4` for a long local run whose Java side is busy)."""
    given = (jvm_args or "").split()
    if any("TieredStopAtLevel" in arg or "TieredCompilation" in arg for arg in given):
        return " ".join(given)
    return " ".join([*given, QUICK_COMPILER])


_ARCHIVE_FLAGS = ("SharedArchiveFile", "ArchiveClassesAtExit", "Xshare")
_QUIET_ARCHIVE = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""Class-archive messages off: the JVM writes to the terminal of the command."""


class ClassArchive:
    """The class archive of this machine's Java and Flink installation, at `path`: the JVM
    options that use it, or that write it (to `pending`) when there is none yet."""

    def __init__(self, path: Path, java: Path | None = None) -> None:
        self.path = path
        self.java = java
        """The Java that checks a written archive before it is moved into place."""
        self.pending = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")

    def jvm_args(self, jvm_args: str | None) -> str:
        """`jvm_args` with the archive used, or written at exit if there is none yet;
        unchanged when they choose class sharing themselves (`-Xshare:off` turns it off)."""
        given = (jvm_args or "").split()
        if any(flag in arg for arg in given for flag in _ARCHIVE_FLAGS):
            return " ".join(given)
        if self.path.is_file():
            return " ".join([*given, f"-XX:SharedArchiveFile={self.path}", *_QUIET_ARCHIVE])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # no cache to keep it in: run without
            return " ".join(given)
        return " ".join([*given, f"-XX:ArchiveClassesAtExit={self.pending}", *_QUIET_ARCHIVE])

    def writes(self, jvm_args: str) -> bool:
        """Whether a JVM started with `jvm_args` writes this archive's pending file."""
        return f"-XX:ArchiveClassesAtExit={self.pending}" in jvm_args.split()

    def move_into_place_after(self, jvm_pid: int) -> None:
        """Start a detached process that moves the pending archive to `path` once the JVM
        `jvm_pid` (which writes it as it exits) is gone."""
        command = [sys.executable, "-I", "-S", "-c", _MOVE_WHEN_GONE, str(jvm_pid)]
        subprocess.Popen(
            [*command, str(self.pending), str(self.path), str(self.java or "java")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


_MOVE_WHEN_GONE = """
import os, subprocess, sys, time
pid, pending, final, java = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def alive():
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # a zombie has exited (Linux shows it; elsewhere its parent reaps it)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True
deadline = time.monotonic() + 600
while alive() and time.monotonic() < deadline:
    time.sleep(0.2)
def loads():
    check = [java, f"-XX:SharedArchiveFile={pending}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    check += ["-XX:-CreateCoredumpOnCrash", "-XX:ErrorFile=/dev/null", "-version"]
    try:
        return subprocess.run(check, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
if not alive() and os.path.isfile(pending) and os.path.getsize(pending) > 0 and loads():
    os.replace(pending, final)
elif os.path.exists(pending):
    os.remove(pending)
"""
"""Wait for the JVM, check that a JVM starts with the archive it wrote (one cut short, by a
kill during the write, say, makes Java 17 crash at start) and rename it into place; a JVM
still there after 10 minutes, an empty or failing file, and the pending file is dropped."""


_LEAST_JAVA = 17
"""The first Java release the class archive is used with (dynamic archives came in 13; 17
is the one tested)."""
_JAVA_VERSION = re.compile(r'^JAVA_VERSION="(?:1\.)?(\d+)', re.MULTILINE)


def _java_release(java: Path) -> int | None:
    """The major release of the Java whose binary is `java`, from its home's `release`
    file; None when there is none."""
    try:
        found = _JAVA_VERSION.search((java.parent.parent / "release").read_text())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def class_archive(cache: Path | None = None) -> ClassArchive | None:
    """The class archive for the Java PyFlink launches (`JAVA_HOME`'s, else the one on
    PATH) and the Flink jars it puts on the classpath, kept in `cache` (by default
    `$XDG_CACHE_HOME/streamagents/jvm`, `~/.cache` without it); None for a Java older than
    17 or not found, and on Windows. Its name digests what the JVM checks the archive
    against: the Java binary, the Flink installation's jars."""
    import pyflink  # its package only: the directory of Flink's jars

    if sys.platform == "win32":  # the watcher's liveness check is POSIX's
        return None
    java_home = os.environ.get("JAVA_HOME")
    found = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    java = None if found is None else Path(found).resolve()
    if java is None or not java.is_file() or (_java_release(java) or 0) < _LEAST_JAVA:
        return None
    if cache is None:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        cache = Path(base) / "streamagents" / "jvm"
    stat = java.stat()
    digest = hashlib.sha256(f"{java}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    for part in (os.environ.get("FLINK_HOME"), os.environ.get("HADOOP_CLASSPATH")):
        digest.update(f"{part}\0".encode())
    flink = Path(pyflink.__file__).parent
    for jar in sorted([*flink.glob("lib/*.jar"), *flink.glob("opt/flink-python*.jar")]):
        digest.update(f"{jar}:{jar.stat().st_size}\0".encode())
    return ClassArchive(cache / f"classes-{digest.hexdigest()[:16]}.jsa", java)


def _launch(archive: ClassArchive | None) -> None:
    """Launch PyFlink's gateway JVM; a failure is left for the next caller to meet. When
    the JVM writes `archive`, have it moved into place once the JVM is gone."""
    from pyflink.java_gateway import get_gateway

    try:
        gateway = get_gateway()
        if archive is not None:
            archive.move_into_place_after(int(gateway.jvm.java.lang.ProcessHandle.current().pid()))
    except Exception:  # the main thread's own call raises it again
        return


def start_in_background() -> threading.Thread:
    """Put this interpreter first on PATH (see `interpreter_first`), keep the JVM to its
    quick compiler (see `quick_compiler`) with its class archive (see `class_archive`),
    skip PyFlink's loopback server unless a worker mode is set already (see
    `NO_LOOPBACK_SERVER`) and start launching the gateway JVM, which inherits that
    environment, on a daemon thread."""
    os.environ["PATH"] = interpreter_first(os.environ.get("PATH"))
    archive = class_archive()
    jvm_args = quick_compiler(os.environ.get("JVM_ARGS"))
    if archive is not None:
        jvm_args = archive.jvm_args(jvm_args)
    os.environ["JVM_ARGS"] = jvm_args
    os.environ.setdefault(*NO_LOOPBACK_SERVER)
    writes = archive if archive is not None and archive.writes(jvm_args) else None
    launcher = threading.Thread(target=_launch, args=(writes,), name="gateway-launch", daemon=True)
    launcher.start()
    return launcher
