"""A run's working copy while one step is computed: its fields, the events it logs, the end.

Every step (`start`, `advance`, `timeout`, the approval steps) copies the `RunState` into a
`RunDraft`, changes the copy and emits events through it, then freezes it into the step's
new state (`snapshot`) or ends the run (`run_endings`).
"""

from __future__ import annotations

from typing import Any

from streamagents.operators.agent._run_events import event_id_for, make_event
from streamagents.operators.agent.run_context import RunContext
from streamagents.operators.agent.run_state import ModelAction, RunState, ToolAction
from streamagents.serde.event_payloads import ChatRequestPayload, EventPayload
from streamagents.serde.events import RunEvent
from streamagents.serde.messages import ChatMessage

__all__ = ["RunDraft"]


class RunDraft:
    """Mutable working copy of a RunState while one step is computed, plus its records."""

    def __init__(self, context: RunContext, state: RunState, now_ms: int) -> None:
        self.context = context
        self.state = state
        self.data: dict[str, Any] = dict(state.__dict__)  # its fields (dict(state): 30x slower)
        self.data["messages"] = list(state.messages)
        self.now_ms = now_ms
        self.events: list[RunEvent] = []
        self.cancelled: list[str] = []

    def emit(self, payload: EventPayload, upstream: str | None = None) -> str:
        """Record an event carrying `payload` (unless neither the log nor telemetry wants it),
        after the run's last event or `upstream`; returns its id."""
        sequence = self.data["sequence"] + 1
        event_id = event_id_for(self.data["run_id"], sequence)
        context = self.context
        if context.wants_events:
            replay_of = self.data["replay_of"]
            if replay_of is not None:
                payload = payload.model_copy(update={"replay_of": replay_of})
            self.events.append(
                make_event(
                    payload,
                    job_id=context.config.job_id,
                    key=self.data["key"],
                    run_id=self.data["run_id"],
                    sequence=sequence,
                    timestamp_ms=self.now_ms,
                    upstream_event_id=self.data["last_event_id"] if upstream is None else upstream,
                )
            )
        self.data["sequence"] = sequence
        self.data["last_event_id"] = event_id
        return event_id

    def loggable(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """`messages` as an event carries them, inline media stored and sent as refs (none
        when no event is kept: nothing would read them)."""
        context = self.context
        if not context.wants_events:
            return []
        return [context.loggable(m) for m in messages]

    def request_model(self, upstream: str) -> str:
        """Log a chat request (its new messages are in the events before it); returns its id."""
        spec = self.context.config.model
        return self.emit(
            ChatRequestPayload(
                model=spec.model, provider=spec.provider, tools=self.context.tool_names
            ),
            upstream=upstream,
        )

    def snapshot(self, pending: ModelAction | ToolAction) -> RunState:
        """The run's new state with `pending` as its next action, its parked time kept."""
        state = self.state.model_copy(update={**self.data, "pending": pending})
        since = state.parked_since_ms
        if state.parked and since is None:
            return state.model_copy(update={"parked_since_ms": self.now_ms})
        if not state.parked and since is not None:
            parked = state.parked_ms + max(0, self.now_ms - since)
            return state.model_copy(update={"parked_ms": parked, "parked_since_ms": None})
        return state
