"""Testing agents without Flink: test models, the in-memory engine harness, wire doubles.

- `ScriptedTestModel` answers from a script (`answer`, `calls`); `EchoTestModel` echoes.
- `AgentHarness` drives an agent through the real engine on the in-memory port: `ask`
  returns an input's `Answer` (output, dead letter, approval requests, run events).
- `streamagents.testing.quota_double` and `streamagents.testing.files_double`: responders
  for `LoopbackStubServer` that play a provider's quota and its file APIs.

See docs/testing-agents.md.
"""

from streamagents.testing.harness import AgentHarness, Answer, Emitted, HarnessError
from streamagents.testing.models import (
    EchoTestModel,
    RecordedCall,
    Reply,
    ScriptedTestModel,
    answer,
    calls,
)

__all__ = [
    "AgentHarness",
    "Answer",
    "EchoTestModel",
    "Emitted",
    "HarnessError",
    "RecordedCall",
    "Reply",
    "ScriptedTestModel",
    "answer",
    "calls",
]
