"""The side outputs of the agent operator and the parse step, in one place."""

from __future__ import annotations

from pyflink.common import Types
from pyflink.datastream import OutputTag

from streamagents.operators.engine.emitter import SideOutputs

__all__ = ["APPROVAL_REQUESTS_TAG", "DEAD_LETTERS_TAG", "EVENTS_TAG", "SIDE_OUTPUTS"]

EVENTS_TAG = OutputTag("streamagents-events", Types.STRING())
"""Side output of the agent function: event-log records (JSON strings); empty when the
function writes its event log itself."""

DEAD_LETTERS_TAG = OutputTag("streamagents-dead-letters", Types.STRING())
"""Side output of both functions: dead-letter records (JSON strings)."""

APPROVAL_REQUESTS_TAG = OutputTag("streamagents-approval-requests", Types.STRING())
"""Side output of the agent function: approval request records (JSON strings)."""

SIDE_OUTPUTS = SideOutputs(
    events=EVENTS_TAG, dead_letters=DEAD_LETTERS_TAG, approval_requests=APPROVAL_REQUESTS_TAG
)
"""The tags the engine pairs its side-output records with."""
