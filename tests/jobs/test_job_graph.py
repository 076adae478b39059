"""The job graph `build_job` makes of the main example, read from Flink's execution plan
without running it: no Python operator that nothing reads."""

from __future__ import annotations

import json
from pathlib import Path

from streamagents.jobs._model_choice import model_spec
from streamagents.jobs.graph import build_job, flink_configuration
from streamagents.jobs.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "jobs" / "examples" / "support_tickets.yaml"


def test_the_example_reads_only_the_side_outputs_it_writes() -> None:
    """PyFlink reads each side output through a Python map that every subtask opens: the
    example (event log written by the agent function, no approvals) reads only its two
    dead-letter side outputs, the parse step's and the agent's."""
    from pyflink.datastream import StreamExecutionEnvironment

    loaded = load_spec(EXAMPLE, {})
    env = StreamExecutionEnvironment.get_execution_environment(flink_configuration(loaded.spec))
    build_job(env, loaded, model_spec(loaded.model, "http://127.0.0.1:9"), hold_input_end=True)
    operators = [node["type"] for node in json.loads(env.get_execution_plan())["nodes"]]
    assert operators.count("Map") == 2, operators
