"""The state of a run in progress and what each step of it hands the engine.

`RunState` is what the engine keeps in keyed state between steps: the run's conversation,
its counters and its pending action (`ModelAction` or `ToolAction`). `perform` returns an
`Outcome`; `start`, `advance`, `timeout` and the approval steps return a `Step`: one of
`Continue`, `Park`, `Defer`, `Finish`, `Stale`, `Duplicate` or `Unchanged`, each with the
fields its kind needs. All are pydantic models that round-trip through JSON.
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from streamagents.operators.agent.approvals import PendingApproval
from streamagents.operators.agent.emitted_records import ApprovalRequest, DeadLetter, OutputRecord
from streamagents.operators.agent.followups import Followup
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.replay import RecordedToolCall
from streamagents.serde.chat import AnsweredBy, ChatResponse, RetryAttempt
from streamagents.serde.events import RunEvent
from streamagents.serde.messages import ChatMessage, MediaRef, ToolCall

__all__ = [
    "Continue",
    "Defer",
    "Duplicate",
    "Finish",
    "ModelAction",
    "Outcome",
    "Park",
    "PendingAction",
    "RunState",
    "Stale",
    "Step",
    "ToolAction",
    "Unchanged",
    "goes_on",
    "run_id_for",
]


def run_id_for(job_id: str, input_id: str) -> str:
    """The run id of an input: derived from the job and the input id, so replays agree."""
    return "run-" + hashlib.sha256(f"{job_id}\n{input_id}".encode()).hexdigest()[:32]


class ModelAction(BaseModel):
    """Pending work: one model call with the run's conversation."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["model"] = "model"
    request_event_id: str = Field(description="The chat_request event this call answers.")


class ToolAction(BaseModel):
    """Pending work: the tool calls of one model turn, to run concurrently.

    Calls that need approval wait (`approvals`) until decided; the others run at once.
    Results land in `done` as they come; the turn ends when every call has one."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["tools"] = "tools"
    calls: list[ToolCall] = Field(description="The calls, in the model's order.")
    request_event_ids: list[str] = Field(description="The tool_request event of each call.")
    approvals: list[PendingApproval] = Field(
        default_factory=list, description="The calls that need a decision, and their state."
    )
    done: dict[str, ChatMessage] = Field(
        default_factory=dict, description="Results already in, by call id."
    )

    @property
    def request_event_id(self) -> str:
        """The first call's request event (identifies this action)."""
        return self.request_event_ids[0]

    def approval(self, call_id: str) -> PendingApproval | None:
        """The approval entry of a call, if it needs one."""
        return next((a for a in self.approvals if a.call_id == call_id), None)

    @property
    def runnable_calls(self) -> list[ToolCall]:
        """Calls without a result that may run now: no approval needed, or approved."""
        blocked = {a.tool_call_id for a in self.approvals if a.status != "approved"}
        return [c for c in self.calls if c.id not in self.done and c.id not in blocked]

    @property
    def waiting(self) -> list[PendingApproval]:
        """Approvals still waiting for a decision."""
        return [a for a in self.approvals if a.status == "waiting"]


PendingAction = Annotated[ModelAction | ToolAction, Field(discriminator="kind")]


class RunState(BaseModel):
    """One run in progress (sensory memory and counters); the engine keeps it in keyed state."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    input_id: str
    key: str
    started_ms: int
    messages: list[ChatMessage] = Field(description="The run's conversation; media as refs.")
    model_calls: int = 0
    tool_calls: int = 0
    unknown_tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = Field(default=0, description="Of the input tokens, those from a cache.")
    call_costs_usd: list[float | None] = Field(
        default_factory=list,
        description="The cost of each answered model call in US dollars (None: its model has "
        "no price).",
    )
    sequence: int = Field(default=0, description="Sequence number of the last event emitted.")
    last_event_id: str | None = None
    interaction_id: str | None = Field(
        default=None,
        description="The stored interaction of the run's last model reply (Interactions API): "
        "the next model call continues it.",
    )
    answered_by: AnsweredBy | None = Field(
        default=None, description="The model that gave the run's last model reply."
    )
    pending: PendingAction
    parked_ms: int = Field(
        default=0, description="Time spent parked for approvals (not counted by run_timeout_s)."
    )
    parked_since_ms: int | None = Field(default=None, description="When it parked, if it is.")
    attributes: dict[str, Any] = Field(default_factory=dict, description="Passed to the output.")
    followups: list[Followup] = Field(
        default_factory=list, description="Follow-ups this run scheduled, kept when it ends."
    )
    followups_waiting: int = Field(
        default=0, description="The key's follow-ups already waiting when the run started."
    )
    raw: str | None = Field(default=None, description="The raw input line when it is small.")
    raw_ref: MediaRef | None = Field(default=None, description="The raw input, in the store.")
    replay_of: str | None = Field(
        default=None, description="The recorded run this run replays (replay jobs only)."
    )
    recorded_tools: list[RecordedToolCall] = Field(
        default_factory=list, description="The recorded run's tool calls (replay jobs only)."
    )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens so far."""
        return self.input_tokens + self.output_tokens

    @property
    def priced_cost_usd(self) -> float:
        """The run's spend in US dollars so far, over the calls whose price is known."""
        return sum(cost for cost in self.call_costs_usd if cost is not None)

    @property
    def timeout_base_ms(self) -> int:
        """When the run's `run_timeout_s` started counting: its start, moved on by the time
        it spent parked."""
        return self.started_ms + self.parked_ms

    def deadline_ms(self, run_timeout_s: float) -> int:
        """The first millisecond at which the run has used its whole `run_timeout_s`, the
        time it spent parked not counted: the one rule for a run's deadline."""
        return self.timeout_base_ms + math.ceil(run_timeout_s * 1000)

    @property
    def parked(self) -> bool:
        """Whether the run waits for decisions only, with nothing to perform meanwhile."""
        pending = self.pending
        return isinstance(pending, ToolAction) and not pending.runnable_calls

    @property
    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of the approvals still waiting, if any."""
        pending = self.pending
        if not isinstance(pending, ToolAction) or not pending.waiting:
            return None
        return min(a.deadline_ms for a in pending.waiting)


class Outcome(BaseModel):
    """What `perform` did: a model response, tool results, or an error; JSON-serialisable."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["model", "tools"]
    action_id: str = Field(description="request_event_id of the action performed.")
    call_ids: list[str] = Field(
        default_factory=list, description="The tool calls performed (empty: all of the turn)."
    )
    response: ChatResponse | None = None
    results: list[ChatMessage] = Field(default_factory=list, description="Tool results, in order.")
    error: ErrorInfo | None = None
    latency_ms: float = 0.0
    attempts: int | None = Field(
        default=None, description="Requests a model call that failed sent (None: not known)."
    )
    retries: list[RetryAttempt] = Field(
        default_factory=list, description="The failed attempts it retried before giving up."
    )
    from_journal: list[str] = Field(
        default_factory=list,
        description="The calls the call journal answered: the action id of a model call, "
        "the ids of tool calls.",
    )
    unrecorded: int = Field(
        default=0, ge=0, description="Completed calls the call journal could not keep."
    )


class _Step(BaseModel):
    """What every step may hand the engine besides its kind's own fields."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    events: list[RunEvent] = Field(
        default_factory=list,
        description="Event-log records to emit (`RunEvent.json()` where text is needed).",
    )
    settled: dict[str, str] = Field(
        default_factory=dict,
        description="Approvals settled by this step: call id -> the decision's fingerprint, "
        "or `expired`; the engine remembers them to tell duplicates from stale decisions.",
    )
    cancelled: list[str] = Field(
        default_factory=list, description="Ids of the key's waiting follow-ups to drop."
    )


class Continue(_Step):
    """The run goes on: the engine keeps it and performs its pending action."""

    kind: Literal["continue"] = "continue"
    state: RunState = Field(description="The run's new state.")
    approval_requests: list[ApprovalRequest] = Field(
        default_factory=list, description="Approval requests to emit (some calls still run)."
    )


class Park(_Step):
    """The run waits for decisions only: the engine keeps it, with a timer at its earliest
    approval deadline, and performs nothing meanwhile."""

    kind: Literal["park"] = "park"
    state: RunState = Field(description="The run's new state (`parked`).")
    approval_requests: list[ApprovalRequest] = Field(
        default_factory=list, description="Approval requests to emit."
    )


class Defer(_Step):
    """The run waits for a spend window to have room: kept without a call until then."""

    kind: Literal["defer"] = "defer"
    state: RunState = Field(description="The run as it waits.")


class Finish(_Step):
    """The run ended: its output, maybe a dead letter, the key's new history."""

    kind: Literal["finish"] = "finish"
    state: None = Field(default=None, description="None: a finished run has no state.")
    output: OutputRecord = Field(description="The run's output record.")
    dead_letter: DeadLetter | None = Field(default=None, description="A dead letter, if any.")
    history: list[ChatMessage] | None = Field(
        default=None,
        description="The key's new short-term history when it changed; None leaves the "
        "stored history as it is.",
    )
    followups: list[Followup] = Field(
        default_factory=list, description="The follow-ups it scheduled, for the engine to keep."
    )


class Stale(_Step):
    """An outcome for another action than the pending one: ignored, the run as it was."""

    kind: Literal["stale"] = "stale"
    state: RunState = Field(description="The run, unchanged.")


class Duplicate(_Step):
    """A decision already applied came again: ignored."""

    kind: Literal["duplicate"] = "duplicate"
    state: RunState | None = Field(description="The run it named, unchanged (None: ended).")


class Unchanged(_Step):
    """A decision or an expiry that changed no run: a decision refused (its dead letter
    says why), or an expiry with nothing due."""

    kind: Literal["unchanged"] = "unchanged"
    state: RunState | None = Field(description="The run it named, unchanged (None: none).")
    dead_letter: DeadLetter | None = Field(default=None, description="Why it was refused.")


Step = Annotated[
    Continue | Park | Defer | Finish | Stale | Duplicate | Unchanged, Field(discriminator="kind")
]
"""What the engine must do after a step of a run, by kind."""


def goes_on(
    state: RunState,
    events: list[RunEvent],
    approval_requests: list[ApprovalRequest] | None = None,
    settled: dict[str, str] | None = None,
) -> Continue | Park:
    """The step of a run that goes on with `state`: parked when it waits for decisions
    only, else with its pending action to perform."""
    kind = Park if state.parked else Continue
    return kind(
        state=state,
        events=events,
        approval_requests=approval_requests or [],
        settled=settled or {},
    )
