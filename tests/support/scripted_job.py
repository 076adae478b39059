"""What the scripted mini-cluster e2e jobs share: their environment and their stub model."""

from __future__ import annotations

import doubles
import e2e_tools
import provider_wire
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from streamagents.operators.agent import ModelSpec
from streamagents.operators.flink import configure_environment


def scripted_environment(parallelism: int = 1) -> StreamExecutionEnvironment:
    """A mini-cluster environment whose Python workers can import the test tools and doubles."""
    env = StreamExecutionEnvironment.get_execution_environment(
        configure_environment(Configuration())
    )
    env.set_parallelism(parallelism)
    for module in (e2e_tools, doubles, provider_wire):
        env.add_python_file(module.__file__)
    return env


def stub_gemini(url: str) -> ModelSpec:
    """The Gemini model pointed at a loopback stub, with retries off (a script answers once)."""
    return ModelSpec(
        provider="gemini",
        model="gemini-3-flash-preview",
        options={"api_key": "test-key", "base_url": url, "max_retries": 0},
    )
