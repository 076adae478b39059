"""Drive `streamagents run`/`savepoint` as a user would, in subprocesses, for end-to-end tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["CLI", "demo_env", "savepoint", "start_run", "wait_for"]

CLI = [str(Path(sys.executable).parent / "streamagents")]


def demo_env() -> dict[str, str]:
    """This environment without provider API keys (the demo model is used), with this
    interpreter's bin first on PATH and this folder on PYTHONPATH (so a spec may name a
    test double of it as a responder)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "OPENAI_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    support = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (support, env.get("PYTHONPATH")) if p)
    return env


def wait_for(predicate: Callable[[], object], timeout_s: float = 120.0) -> None:
    """Poll `predicate` every half second until it is true; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError("condition not met in time")


def start_run(spec: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """Start `streamagents run` in the background; returns it with its job id and REST address."""
    handle = log.open("w")
    process = subprocess.Popen(
        [*CLI, "run", str(spec), *extra], env=demo_env(), stdout=handle, stderr=subprocess.STDOUT
    )
    found: list[re.Match[str]] = []

    def started() -> bool:
        # the whole line, so that its --target-dir is there too when this returns
        match = re.search(
            r"savepoint ([0-9a-f]{32}) --jobmanager (\S+) --target-dir \S+ ", log.read_text()
        )
        if match:
            found.append(match)
        return bool(match) or process.poll() is not None

    try:
        wait_for(started, 300)  # a loaded machine takes minutes to start a JVM
        assert found, log.read_text()[-3000:]
    except BaseException:
        process.kill()  # a job that starts after the test gave up must not run on
        raise
    return process, found[0].group(1), found[0].group(2)


def savepoint(job_id: str, address: str, target: Path) -> str:
    """`streamagents savepoint`: stop the job with a savepoint; returns its location."""
    # the command's own timeout comes first, so that a stop that hangs says how far it got
    command = [*CLI, "savepoint", job_id, "--jobmanager", address, "--target-dir", str(target)]
    result = subprocess.run(
        [*command, "--timeout", "240"],
        env=demo_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()
