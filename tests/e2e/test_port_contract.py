"""The port contract on the PyFlink binding: one mini-cluster job plays the contract's
script (`tests/support/port_contract.py`) through `FlinkKeyedPort`, and gives what the
in-memory port gives for it, records for records (the clock left out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import engine_harness
import port_contract
import pytest
from port_contract import (
    Emitted,
    check_cases,
    contract_config,
    contract_runtime,
    in_memory_run,
    normalised,
    paced,
    script_lines,
)
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from streamagents.operators.flink import agent_stream, configure_environment

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def flink_run(tmp_path_factory: pytest.TempPathFactory) -> Emitted:
    """Run the script once in a job (parallelism 1, thread mode) and collect its records."""
    root = tmp_path_factory.mktemp("port-contract")
    env = StreamExecutionEnvironment.get_execution_environment(
        configure_environment(Configuration())
    )
    env.set_parallelism(1)
    for module in (engine_harness, port_contract):
        env.add_python_file(module.__file__)
    lines = env.from_collection(script_lines(), type_info=Types.STRING()).flat_map(
        paced, output_type=Types.STRING()
    )
    streams = agent_stream(
        lines, contract_config(str(root / "media")), runtime_factory=contract_runtime
    )
    tagged = streams.outputs.map(lambda s: ("outputs", s), Types.PICKLED_BYTE_ARRAY()).union(
        streams.events.map(lambda s: ("events", s), Types.PICKLED_BYTE_ARRAY()),
        streams.dead_letters.map(lambda s: ("dead_letters", s), Types.PICKLED_BYTE_ARRAY()),
    )
    found: dict[str, list[dict[str, Any]]] = {"outputs": [], "events": [], "dead_letters": []}
    with tagged.execute_and_collect("port-contract") as results:
        for channel, text in results:
            found[channel].append(json.loads(text))
    return Emitted(found["outputs"], found["events"], found["dead_letters"])


def test_the_contract_cases_keep_their_promises_in_a_job(flink_run: Emitted) -> None:
    """A tool call, a queued input, a follow-up, an expired memory, a follow-up dead-lettered
    and a run drained at the end of input each give what the case promises."""
    check_cases(flink_run)


def test_the_job_gives_what_the_in_memory_port_gives(flink_run: Emitted, tmp_path: Path) -> None:
    """Outputs, events (ids, sequences, the events they follow, each run's place among its
    key's runs) and dead letters are the in-memory port's, one for one."""
    expected = normalised(in_memory_run(tmp_path))
    got = normalised(flink_run)
    for channel in ("outputs", "dead_letters", "events"):
        assert got[channel] == expected[channel], channel
