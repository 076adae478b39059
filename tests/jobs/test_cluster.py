"""Cluster support without a cluster: the PATH Flink's processes and workers see."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from streamagents.jobs.cluster import interpreter_first, script_environment

BIN = str(Path(sys.executable).parent)


def test_the_interpreter_s_directory_comes_first_on_path_once() -> None:
    path = os.pathsep.join(["/usr/bin", BIN, "/bin"])
    assert interpreter_first(path).split(os.pathsep) == [BIN, "/usr/bin", "/bin"]
    assert interpreter_first(None) == BIN


def test_flink_scripts_get_the_interpreter_first_on_path() -> None:
    assert script_environment({"X": "1"})["PATH"].split(os.pathsep)[0] == BIN
