"""The PyFlink engine that runs agents on keyed streams: `agent_stream` and its settings.

```python
from streamagents.operators.agent import AgentConfig, ModelSpec
from streamagents.operators.flink import agent_stream, configure_environment

env = StreamExecutionEnvironment.get_execution_environment(configure_environment(Configuration()))
streams = agent_stream(lines, AgentConfig(model=ModelSpec(provider="gemini", model="...")))
streams.outputs.sink_to(...); streams.events.sink_to(...); streams.dead_letters.sink_to(...)
```
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

from pyflink.common import Configuration, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment

from streamagents.operators.agent import AgentConfig, AgentRuntime
from streamagents.operators.agent.approvals import Takes
from streamagents.operators.flink.agent_function import AgentFunction, RuntimeFactory
from streamagents.operators.flink.eventlog_sink import (
    EventLogSinkFunction,
    event_log_writer,
    sink_event_log,
)
from streamagents.operators.flink.input_end_hold import key_with_hold
from streamagents.operators.flink.parse_records import KEYED_INPUT_TYPE, ParseRecords
from streamagents.operators.flink.settings import (
    BACKLOG_SETTINGS,
    BUFFER_DEBLOAT,
    ENGINE_SETTINGS,
)
from streamagents.operators.flink.side_outputs import (
    APPROVAL_REQUESTS_TAG,
    DEAD_LETTERS_TAG,
    EVENTS_TAG,
)

__all__ = [
    "BACKLOG_SETTINGS",
    "BUFFER_DEBLOAT",
    "ENGINE_SETTINGS",
    "AgentStreams",
    "RuntimeFactory",
    "agent_stream",
    "configure_environment",
    "event_log_writer",
    "sink_event_log",
]

E = TypeVar("E", Configuration, StreamExecutionEnvironment)


class AgentStreams(NamedTuple):
    """The streams of an agent: output records, event-log records, dead letters, and the
    approval requests of tool calls that wait for a person's decision."""

    outputs: DataStream
    events: DataStream
    dead_letters: DataStream
    approval_requests: DataStream


def configure_environment(env_or_config: E) -> E:
    """Apply the settings the agent engine requires, and those that keep checkpoints going
    under backlog, to a Configuration or an environment."""
    settings = {**ENGINE_SETTINGS, **BACKLOG_SETTINGS}
    if isinstance(env_or_config, StreamExecutionEnvironment):
        config = Configuration()
        for key, value in settings.items():
            config.set_string(key, value)
        env_or_config.configure(config)
        return env_or_config
    for key, value in settings.items():
        env_or_config.set_string(key, value)
    return env_or_config


def _parsed(lines: DataStream, parse: ParseRecords, name: str) -> DataStream:
    """A channel's lines parsed into (key, line), at the channel's parallelism so the parse
    chains to it: a key's lines then reach the agent in the order of their source partition
    (a rebalance would reorder them)."""
    parsed = lines.process(parse, output_type=KEYED_INPUT_TYPE)
    parallelism = lines._j_data_stream.getParallelism()
    return parsed.set_parallelism(parallelism).name(name).uid(name)


def agent_stream(
    records: DataStream,
    config: AgentConfig,
    runtime_factory: RuntimeFactory = AgentRuntime.from_config,
    uid: str | None = None,
    event_log: EventLogSinkFunction | None = None,
    hold_input_end: bool = False,
    decisions: DataStream | None = None,
) -> AgentStreams:
    """Run the agent `config` describes on a stream of JSON input lines, one run per key.

    `records` carries input lines (JSON strings, see the record format); `decisions`, when
    given, the decisions on parked tool calls (lines with `approval`), which `records` then
    may not carry; without it, `records` carries them too only when the config allows it
    (`decisions.from_input`), and a decision it may not carry is a dead letter. The result
    holds the output records, the event-log records, the dead letters and the approval
    requests, all JSON strings.
    `runtime_factory` builds the runtime in each subtask (default: from the config);
    `uid` names the stateful operator for savepoints (default: `config.job_id`).
    `event_log` (from `event_log_writer`) makes the agent function write its events to the
    Avro event log itself; the events stream is then empty.
    `hold_input_end` keeps the function's input open after a bounded `records` ends, so
    its last runs finish under regular checkpoints; the job then runs until it is stopped
    with a savepoint that drains (see `operators/flink/input_end_hold.py`).
    """
    name = uid or config.job_id
    if decisions is not None and config.decisions.from_input:
        raise ValueError(
            "decisions.from_input is for a job without an approvals source: with one, "
            "decisions come from it only"
        )
    takes: Takes = "both" if decisions is None and config.decisions.from_input else "inputs"
    parsed = _parsed(records, ParseRecords(config, takes), f"{name}-parse")
    parse_letters = parsed.get_side_output(DEAD_LETTERS_TAG)
    if decisions is not None:
        decided = _parsed(decisions, ParseRecords(config, "decisions"), f"{name}-parse-approvals")
        parse_letters = parse_letters.union(decided.get_side_output(DEAD_LETTERS_TAG))
        parsed = parsed.union(decided)
    if hold_input_end:
        keyed = key_with_hold(parsed, name)
    else:
        keyed = parsed.key_by(lambda keyed: keyed[0], key_type=Types.STRING())
    outputs = (
        keyed.process(AgentFunction(config, runtime_factory, event_log), output_type=Types.STRING())
        .name(f"{name}-agent")
        .uid(f"{name}-agent")
    )
    dead_letters = parse_letters.union(outputs.get_side_output(DEAD_LETTERS_TAG))
    return AgentStreams(
        outputs,
        outputs.get_side_output(EVENTS_TAG),
        dead_letters,
        outputs.get_side_output(APPROVAL_REQUESTS_TAG),
    )
