"""The agent core in plain Python: config, tools, memory, records and the run state machine.

Nothing here imports PyFlink: `AgentRuntime` turns an input record into model and tool
calls step by step (each step a `Step`, the run between steps a `RunState`, what a call
brought an `Outcome`), and `streamagents.operators.flink` drives it on a keyed stream.

```python
config = AgentConfig(model=ModelSpec(provider="gemini", model="..."), tools=["my_tools:lookup"])
runtime = AgentRuntime.from_config(config)
```
"""

from __future__ import annotations

from streamagents.operators.agent.config import (
    AgentConfig,
    AgentSettings,
    Budgets,
    InputLimits,
    InputMedia,
    MemoryConfig,
    ModelSpec,
    TelemetryConfig,
)
from streamagents.operators.agent.run_state import Outcome, RunState, Step
from streamagents.operators.agent.runtime import AgentRuntime
from streamagents.operators.agent.tool_context import ToolContext
from streamagents.operators.agent.tools import Tool, ToolRegistry, load_tool, tool

__all__ = [
    "AgentConfig",
    "AgentRuntime",
    "AgentSettings",
    "Budgets",
    "InputLimits",
    "InputMedia",
    "MemoryConfig",
    "ModelSpec",
    "Outcome",
    "RunState",
    "Step",
    "TelemetryConfig",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "load_tool",
    "tool",
]
