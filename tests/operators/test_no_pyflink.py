"""The agent core, the engine and telemetry import and run without PyFlink: nothing under
them loads a pyflink module."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter: with pyflink blocked, import every module of the agent core,
# the engine and telemetry (which pull in the serde and connectors modules they use) and
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
    import streamagents.operators.agent as agent
    import streamagents.operators.engine as engine
    import streamagents.operators.telemetry as telemetry
    import streamagents.serde, streamagents.connectors
    for package in (agent, engine, telemetry):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    config = agent.AgentConfig(model=agent.ModelSpec(provider="gemini", model="m"))
    print(json.dumps({"config": config.model.provider, "modules": sorted(sys.modules)}))
    """
)


def test_the_agent_core_the_engine_and_telemetry_import_without_pyflink() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    modules = report["modules"]
    assert report["config"] == "gemini"
    assert "streamagents.operators.agent.runtime" in modules
    assert "streamagents.operators.engine.engine" in modules
    assert "streamagents.operators.telemetry.live" in modules
    assert any(m.startswith("streamagents.connectors.") for m in modules)
    assert any(m.startswith("streamagents.serde.") for m in modules)
    assert [m for m in modules if m.split(".")[0] == "pyflink"] == []
