"""The example jobs' agents as the engine would build them, to drive through the runtime."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import demo_server, model_spec
from streamagents.jobs.spec import LoadedSpec, check_runnable, load_spec
from streamagents.operators.agent import AgentRuntime

EXAMPLES = Path(__file__).resolve().parents[2] / "jobs" / "examples"


@contextlib.contextmanager
def example_runtime(
    spec_name: str, tmp_path: Path, now_ms: int
) -> Iterator[tuple[AgentRuntime, LoadedSpec]]:
    """The runtime of an example spec (checked runnable) with its demo model, the scripted
    test double, served on 127.0.0.1; media under `tmp_path`, the clock at `now_ms`."""
    loaded = load_spec(EXAMPLES / spec_name, {})
    check_runnable(loaded)
    with demo_server(loaded.model) as url:
        config = agent_config(loaded, model_spec(loaded.model, url))
        runtime = AgentRuntime.from_config(
            config.model_copy(update={"media_store": str(tmp_path / "media")})
        )
        runtime.clock_ms = lambda: float(now_ms)
        try:
            yield runtime, loaded
        finally:
            asyncio.run(runtime.aclose())
