"""Agent operators, in two subpackages.

- `streamagents.operators.agent`: the agent core in plain Python (config, tools, memory,
  input and output records, the `AgentRuntime` state machine); it never imports PyFlink.
- `streamagents.operators.flink`: the PyFlink engine that runs it on keyed streams
  (`agent_stream`, `configure_environment`, `sink_event_log`).
"""
