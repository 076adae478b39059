"""Agent operators, in four subpackages.

- `streamagents.operators.agent`: the agent core in plain Python (config, tools, memory,
  input and output records, the `AgentRuntime` state machine); it never imports PyFlink.
- `streamagents.operators.engine`: the agent engine in plain Python, keyed-state
  components over a port (`AgentEngine`); it never imports PyFlink.
- `streamagents.operators.flink`: the PyFlink engine that runs it on keyed streams
  (`agent_stream`, `configure_environment`, `sink_event_log`).
- `streamagents.operators.engine`: the engine's parts that need no PyFlink, such as the
  Flink settings it requires (`flink_settings`).
- `streamagents.operators.telemetry`: spans, live telemetry and runs built from the
  events of agent runs; it never imports PyFlink.
"""
