"""How the command line's process ends: a command that leaves nothing for anyone to read (a
`run` that ended its bounded input itself) ends it at once, without Python's teardown, its
output flushed; any other ends it as usual, and `main(argv)` called as a function returns
(checked in new processes, with a probe command in place of the real ones)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE_COMMAND = """
def register(subparsers):
    finish = subparsers.add_parser("finish")
    finish.add_argument("--at-once", action="store_true")
    finish.set_defaults(handler=_finish)


def _finish(args):
    print("summary line")  # buffered: the pipe makes stdout block-buffered
    args.exit_at_once = args.at_once
    return 3
"""

PROBE = """
import atexit, sys
from streamagents.jobs.cli import main as cli
cli._COMMAND_MODULES = ("probe_command",)
atexit.register(print, "teardown ran")
if sys.argv[1] == "as-function":
    print("returned", cli.main(["finish", "--at-once"]))
else:
    sys.argv = ["streamagents", "finish", *sys.argv[2:]]
    sys.exit(cli.main())
"""


def _probe(tmp_path: Path, *words: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "probe_command.py").write_text(PROBE_COMMAND)
    return subprocess.run(
        [sys.executable, "-c", PROBE, *words],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_command_with_nothing_left_to_read_ends_the_process_at_once(tmp_path: Path) -> None:
    ended = _probe(tmp_path, "as-command", "--at-once")
    assert (ended.returncode, ended.stdout) == (3, "summary line\n"), ended.stderr[-2000:]


def test_other_commands_and_main_called_as_a_function_end_as_usual(tmp_path: Path) -> None:
    usual = _probe(tmp_path, "as-command")
    assert (usual.returncode, usual.stdout) == (3, "summary line\nteardown ran\n")
    called = _probe(tmp_path, "as-function")
    assert (called.returncode, called.stdout) == (0, "summary line\nreturned 3\nteardown ran\n")
