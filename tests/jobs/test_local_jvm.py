"""The JVM a `run` starts early: its launch is under way while the command's modules are
imported, with this interpreter first on its PATH, its quick compiler only, its class
archive and no loopback server for process-mode workers (checked in a new process, as the
command line runs, so this test process keeps its own environment and has no gateway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamagents.jobs._local_jvm import ClassArchive, class_archive, quick_compiler

BIN = str(Path(sys.executable).parent)

PROBE = """
import json, os, sys, threading
seen = {}

class WatchImports:
    def find_spec(self, name, path, target=None):
        if name == "streamagents.jobs._run_commands":
            launching = [t for t in threading.enumerate() if t.name == "gateway-launch"]
            seen["launching_as_the_commands_load"] = bool(launching)
        return None

sys.meta_path.insert(0, WatchImports())
from streamagents.jobs.cli import main
seen["exit_code"] = main(["run", "no-such-spec.yaml"])
for thread in threading.enumerate():
    if thread.name == "gateway-launch":
        thread.join(300)
import pyflink.java_gateway as gateway
seen["jvm_path_first"] = gateway._gateway.jvm.java.lang.System.getenv("PATH").split(os.pathsep)[0]
runtime = gateway._gateway.jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
arguments = list(runtime.getInputArguments())
seen["jvm_quick_compiler"] = "-XX:TieredStopAtLevel=1" in arguments
seen["class_archive"] = [a.split("=")[0] for a in arguments if "Archive" in a]
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.util.java_utils import get_j_env_configuration
env = StreamExecutionEnvironment.get_execution_environment()
config = get_j_env_configuration(env._j_stream_execution_environment)
seen["loopback_server"] = config.containsKey("python.loopback-server.address")
seen["beam_worker_imported"] = "apache_beam.runners.worker.sdk_worker" in sys.modules
print(json.dumps(seen))
"""


def _probe(cache: Path) -> dict[str, Any]:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    for name in ("_python_worker_execution_mode", "JVM_ARGS"):
        env.pop(name, None)
    others = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry != BIN]
    env["PATH"] = os.pathsep.join(["/usr/bin", *others])  # java still found, BIN not first
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return seen


def test_run_launches_its_jvm_while_the_commands_load_with_this_python_first(
    tmp_path: Path,
) -> None:
    seen = _probe(tmp_path)
    assert seen == {
        "launching_as_the_commands_load": True,
        "exit_code": 2,  # the spec is missing: refused as before
        "jvm_path_first": BIN,  # the JVM's thread-mode workers find this interpreter
        "jvm_quick_compiler": True,  # C1 only: the optimising compiler's CPU is saved
        "class_archive": ["-XX:ArchiveClassesAtExit"],  # none yet: written as the JVM exits
        "loopback_server": False,  # thread-mode workers never call it: not started
        "beam_worker_imported": False,  # nor is Beam's worker imported for it
    }
    # Moved into place once that JVM is gone; the next run maps it.
    folder = tmp_path / "streamagents" / "jvm"
    deadline = time.monotonic() + 120
    while not list(folder.glob("*.jsa")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [path.suffix for path in folder.iterdir()] == [".jsa"]
    assert _probe(tmp_path)["class_archive"] == ["-XX:SharedArchiveFile"]
    # An archive cut short (its JVM killed while writing it) would crash every JVM given
    # it: the watcher drops it instead of moving it into place.
    (archive,) = folder.glob("*.jsa")
    cut = ClassArchive(tmp_path / "cut" / "classes.jsa")
    cut.path.parent.mkdir()
    cut.pending.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    gone = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert gone.returncode == 0
    cut.move_into_place_after(os.getpid() + 10**7)  # no such process: gone already
    deadline = time.monotonic() + 60
    while cut.pending.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not cut.pending.exists() and not cut.path.exists()


def test_the_class_archive_is_used_when_there_is_one_and_written_when_there_is_none(
    tmp_path: Path,
) -> None:
    archive = ClassArchive(tmp_path / "jvm" / "classes.jsa")
    writing = archive.jvm_args("-Xmx2g")
    assert writing.split()[:2] == ["-Xmx2g", f"-XX:ArchiveClassesAtExit={archive.pending}"]
    assert archive.writes(writing) and archive.pending.parent.is_dir()
    archive.path.write_bytes(b"an archive")
    using = ClassArchive(archive.path).jvm_args("-Xmx2g")
    assert using.split()[:2] == ["-Xmx2g", f"-XX:SharedArchiveFile={archive.path}"]
    assert not archive.writes(using)
    assert "-Xlog:cds=off" in using.split()  # its messages would go to the command's terminal
    assert ClassArchive(archive.path).jvm_args("-Xshare:off") == "-Xshare:off"  # chosen: kept


def test_no_class_archive_for_a_java_older_than_17(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for release, archived in (('JAVA_VERSION="11.0.2"', False), ('JAVA_VERSION="17.0.15"', True)):
        home = tmp_path / release.split('"')[1]
        (home / "bin").mkdir(parents=True)
        (home / "bin" / "java").write_text("")
        (home / "release").write_text(f"IMPLEMENTOR=x\n{release}\n")
        monkeypatch.setenv("JAVA_HOME", str(home))
        assert (class_archive(tmp_path / "cache") is not None) is archived, release


def test_the_quick_compiler_is_added_to_jvm_args_unless_they_choose_the_compilers() -> None:
    assert quick_compiler(None) == "-XX:TieredStopAtLevel=1"
    assert quick_compiler("-Xmx2g") == "-Xmx2g -XX:TieredStopAtLevel=1"
    assert quick_compiler("-Xmx2g -XX:TieredStopAtLevel=4") == "-Xmx2g -XX:TieredStopAtLevel=4"
    assert quick_compiler("-XX:-TieredCompilation") == "-XX:-TieredCompilation"
