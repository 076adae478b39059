"""What the rerun-to-continue tests share: inputs, a paced demo spec, and killing `run`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import yaml

__all__ = ["INPUTS", "kill_run", "paced_spec", "questions"]

INPUTS = 80
"""Inputs per test: at 2 calls in flight and the responder's pause, about 10 s of work."""
KEYS = 8


def questions(count: int = INPUTS) -> list[tuple[str, str]]:
    """(key, line) of each of `count` inputs, keyed by customer, answered by the demo
    without tools."""
    lines = []
    for n in range(count):
        customer = f"c-{n % KEYS}"
        record = {"id": f"in-{n:03d}", "customer": {"id": customer}, "text": f"Question {n}."}
        lines.append((customer, json.dumps(record)))
    return lines


def paced_spec(directory: Path, name: str, source: dict[str, Any], sinks: dict[str, Any]) -> Path:
    """A spec next to a copy of the paced demo responder: 2 calls in flight, 1 s
    checkpoints, no checkpoint directory (the job's folder holds them)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__).parent / "paced_responder.py", directory)
    spec = {
        "name": name,
        "source": source,
        "key": "customer.id",
        "agent": {
            "model": {"provider": "demo", "model": "paced", "responder": "paced_responder:respond"},
            "system_prompt": "Answer the customer's question.",
            "max_in_flight": 2,
        },
        "media_store": "media",
        "sinks": sinks,
        "checkpointing": {"interval_s": 1},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def kill_run(process: subprocess.Popen[str]) -> None:
    """`kill -9` the `run` process (its mini-cluster JVM ends with it: the gateway exits when
    its parent's pipe closes)."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
