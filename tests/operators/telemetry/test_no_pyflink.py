"""Telemetry imports without PyFlink: nothing under it loads a pyflink module."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter: with pyflink blocked, import every telemetry module and
# report what got loaded.
_PROBE = textwrap.dedent(
    """
    import importlib, importlib.abc, json, pkgutil, sys

    class BlockPyflink(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "pyflink" or name.startswith("pyflink."):
                raise ImportError(f"pyflink is blocked in this test: {name}")
            return None

    sys.meta_path.insert(0, BlockPyflink())
    import streamagents.operators.telemetry as telemetry
    names = [m.name for m in pkgutil.walk_packages(telemetry.__path__, telemetry.__name__ + ".")]
    for name in names:
        importlib.import_module(name)
    print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
    """
)


def test_telemetry_imports_without_pyflink() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "streamagents.operators.telemetry.live" in report["imported"]
    assert "streamagents.operators.telemetry.spans" in report["imported"]
    assert [m for m in report["modules"] if m.split(".")[0] == "pyflink"] == []
