"""What a run's steps read besides the run itself: the agent's settings, its tools, the
media store, and the records made from them.

The runtime builds one `RunContext` and hands it to each step's `RunDraft`, so the steps
(`model_turn`, `tool_turn`, `approval_steps`, `run_endings`) depend on this and never on
the runtime that calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamagents.connectors.media import MediaStore, has_inline_media_above
from streamagents.operators.agent.config import AgentConfig, FollowupConfig
from streamagents.operators.agent.emitted_records import DeadLetter
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_state import RunState
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.serde.message_json import MessageJson
from streamagents.serde.messages import ChatMessage, TextPart

__all__ = ["RunContext"]


@dataclass
class RunContext:
    """The agent a run belongs to, as its steps see it."""

    config: AgentConfig
    tools: ToolRegistry
    store: MediaStore
    """The media store (the runtime may replace it, e.g. with one that hops threads)."""
    tool_names: list[str]
    """The names of the tools the model is told about (the built-in one included)."""
    followups: FollowupConfig | None
    """The bounds of `schedule_followup` when the agent has it (None: it does not)."""
    wants_events: bool
    """Whether steps produce events: for the event log, or for the spans built from them."""
    message_json: MessageJson
    """Each message's JSON text, remembered: memory accounting, the SDK worker's requests."""

    def loggable(self, message: ChatMessage) -> ChatMessage:
        """The message as events carry it: inline media stored and sent as refs.

        Should the store fail, each inline part is logged as a text placeholder instead, so
        logging never fails a run."""
        if not has_inline_media_above(message, 0):
            return message
        try:
            return self.store.offload(message, 0)
        except Exception as exc:
            parts = [
                TextPart(
                    text=f"[{p.kind} {p.mime_type}, {len(p.data)} bytes, not stored: "
                    f"{type(exc).__name__}]"
                )
                if not isinstance(p, TextPart) and p.data is not None
                else p
                for p in message.parts
            ]
            return message.model_copy(update={"parts": parts})

    def received_input(self, state: RunState) -> str:
        """The input line of a run as received, read back from the store when it was large."""
        if state.raw is not None:
            return state.raw
        if state.raw_ref is None:
            return ""
        try:
            return self.store.get(state.raw_ref).decode()
        except Exception as exc:
            return f"<raw input unavailable: {type(exc).__name__}>"

    def dead_letter(self, state: RunState, error: ErrorInfo) -> DeadLetter:
        """The dead letter of a run that failed: `error` and the input as received.

        Reads the store when the input was large: the engine calls it off its task thread.
        """
        return DeadLetter.build(
            "run", error, self.received_input(state), key=state.key, record_id=state.input_id
        )
