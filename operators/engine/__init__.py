"""The agent engine as plain Python: keyed-state components over a port, no pyflink.

`AgentEngine` applies a key's input lines and timers to its runs through a `KeyedPort`;
the PyFlink function binds the port to Flink's state and timers
(`streamagents.operators.flink`), and `InMemoryKeyedPort` binds it to dicts and a manual
clock, for tests that drive the engine without a job.
"""

from streamagents.operators.engine.emitter import Emitter, EventWriter, SideOutputs
from streamagents.operators.engine.engine import AgentEngine
from streamagents.operators.engine.engine_loop import CoroutineEscaped, EngineLoop, Timed
from streamagents.operators.engine.keyed_port import KeyedPort, MapState, StateKind, ValueState
from streamagents.operators.engine.memory_port import InMemoryKeyedPort, PortSnapshot
from streamagents.operators.engine.metrics import EngineMetrics, MetricGroup
from streamagents.operators.engine.run_driver import CallRunner

__all__ = [
    "AgentEngine",
    "CallRunner",
    "CoroutineEscaped",
    "Emitter",
    "EngineLoop",
    "EngineMetrics",
    "EventWriter",
    "InMemoryKeyedPort",
    "KeyedPort",
    "MapState",
    "MetricGroup",
    "PortSnapshot",
    "SideOutputs",
    "StateKind",
    "Timed",
    "ValueState",
]
