"""The agent runtime: one run per input, a state machine the Flink engine drives step by step.

A run goes input → model call → (tool calls → model call)* → output. The engine calls:

- `start(record, history, now_ms)` when a key's next input begins its run (task thread);
- `perform(state, history)` on its asyncio loop: the pending model call, or all pending tool
  calls concurrently; it never raises and changes nothing, so it may be re-issued after a
  restore;
- `advance(state, outcome, now_ms, history)` with what `perform` returned (task thread);
- `timeout(state, now_ms)` when the run's timer fires before it finished.

Each returns a `Step`: the new `RunState` (None when the run finished), the event-log
records to emit, and when finished the output record, maybe a dead letter, and the key's
new short-term history. Every state change and every event happens in start/advance/timeout,
and event ids derive from (run_id, sequence), with run_id derived from the input id, so a
step repeated after recovery produces the same records.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from streamagents.connectors.media import MediaStore, has_inline_media_above
from streamagents.connectors.providers import ChatModel, ProviderError, create_model
from streamagents.connectors.providers.gemini import ContextCacheSettings
from streamagents.connectors.providers.sdk_process import SdkProcessModel, wants_worker
from streamagents.operators.agent._result_or_error import result_or_error
from streamagents.operators.agent._run_events import event_id_for, make_event
from streamagents.operators.agent.approvals import ApprovalDecision, PendingApproval
from streamagents.operators.agent.config import AgentConfig, ToolRef
from streamagents.operators.agent.documents import documents_message
from streamagents.operators.agent.followups import (
    TOOL_NAME as FOLLOWUP_TOOL,
)
from streamagents.operators.agent.followups import (
    Followup,
    confirmation,
    is_followup_line,
    schedule,
    tool_spec,
)
from streamagents.operators.agent.memory import history_expired, trim_history
from streamagents.operators.agent.records import (
    ErrorInfo,
    InputError,
    InputRecord,
    dead_letter_record,
    parse_input,
)
from streamagents.operators.agent.tools import Tool, ToolRegistry, load_tool
from streamagents.serde.chat import ChatResponse, RetryAttempt
from streamagents.serde.event_storage import typed_fields
from streamagents.serde.events import RunEvent
from streamagents.serde.message_json import MessageJson
from streamagents.serde.messages import ChatMessage, MediaRef, TextPart, ToolCall
from streamagents.serde.safe_text import clip

__all__ = [
    "AgentRuntime",
    "InputError",
    "InputRecord",
    "ModelAction",
    "Outcome",
    "RunState",
    "Step",
    "ToolAction",
    "parse_input",
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
    sequence: int = Field(default=0, description="Sequence number of the last event emitted.")
    last_event_id: str | None = None
    interaction_id: str | None = Field(
        default=None,
        description="The stored interaction of the run's last model reply (Interactions API): "
        "the next model call continues it.",
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

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens so far."""
        return self.input_tokens + self.output_tokens

    @property
    def timeout_base_ms(self) -> int:
        """When the run's `run_timeout_s` started counting: its start, moved on by the time
        it spent parked."""
        return self.started_ms + self.parked_ms

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


class Step(BaseModel):
    """What the engine must do after start/advance/timeout."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    state: RunState | None = Field(description="The run's new state; None when it finished.")
    events: list[RunEvent] = Field(
        default_factory=list,
        description="Event-log records to emit (`RunEvent.json()` where text is needed).",
    )
    output: str | None = Field(default=None, description="Output record JSON when finished.")
    dead_letter: str | None = Field(default=None, description="Dead-letter JSON, if any.")
    history: list[ChatMessage] | None = Field(
        default=None,
        description="The key's new short-term history when the run finished and it changed; "
        "None leaves the stored history as it is.",
    )
    stale: bool = Field(
        default=False, description="The outcome was for another action and was ignored."
    )
    approval_requests: list[str] = Field(
        default_factory=list, description="Approval request records (JSON) to emit."
    )
    settled: dict[str, str] = Field(
        default_factory=dict,
        description="Approvals settled by this step: call id -> the decision's fingerprint, "
        "or `expired`; the engine remembers them to tell duplicates from stale decisions.",
    )
    duplicate: bool = Field(
        default=False, description="A decision already applied came again and was ignored."
    )
    followups: list[Followup] = Field(
        default_factory=list,
        description="When the run ended: the follow-ups it scheduled, for the engine to keep.",
    )
    cancelled: list[str] = Field(
        default_factory=list, description="Ids of the key's waiting follow-ups to drop."
    )

    @property
    def finished(self) -> bool:
        """Whether the run ended with this step."""
        return self.state is None


def _call_of(pending: ToolAction, call_id: str) -> ToolCall:
    return next(c for c in pending.calls if c.id == call_id)


def _outcome_fits(pending: PendingAction, outcome: Outcome) -> bool:
    """Whether a tools outcome is for calls that may run now and have no result yet."""
    if not isinstance(pending, ToolAction) or not outcome.call_ids:
        return True
    runnable = {call.id for call in pending.runnable_calls}
    return set(outcome.call_ids) <= runnable


class _Run:
    """Mutable working copy of a RunState while one step is computed, plus its records."""

    def __init__(self, runtime: AgentRuntime, state: RunState, now_ms: int) -> None:
        self.runtime = runtime
        self.state = state
        self.data: dict[str, Any] = dict(state.__dict__)  # its fields (dict(state): 30x slower)
        self.data["messages"] = list(state.messages)
        self.now_ms = now_ms
        self.events: list[RunEvent] = []
        self.cancelled: list[str] = []

    def emit(self, event_type: str, upstream: str | None = None, **payload: Any) -> str:
        """Record an event of the run (unless neither the log nor telemetry wants it);
        returns its id."""
        sequence = self.data["sequence"] + 1
        event_id = event_id_for(self.data["run_id"], sequence)
        if self.runtime.wants_events:
            for field in ("messages", "tool_results"):
                if field in payload:
                    payload[field] = [self.runtime.loggable(m) for m in payload[field]]
            self.events.append(
                make_event(
                    event_type,
                    job_id=self.runtime.config.job_id,
                    key=self.data["key"],
                    run_id=self.data["run_id"],
                    sequence=sequence,
                    timestamp_ms=self.now_ms,
                    upstream_event_id=self.data["last_event_id"] if upstream is None else upstream,
                    **payload,
                )
            )
        self.data["sequence"] = sequence
        self.data["last_event_id"] = event_id
        return event_id

    def snapshot(self, pending: ModelAction | ToolAction) -> RunState:
        state = self.state.model_copy(update={**self.data, "pending": pending})
        since = state.parked_since_ms
        if state.parked and since is None:
            return state.model_copy(update={"parked_since_ms": self.now_ms})
        if not state.parked and since is not None:
            parked = state.parked_ms + max(0, self.now_ms - since)
            return state.model_copy(update={"parked_ms": parked, "parked_since_ms": None})
        return state


def _declared_tool(entry: str | ToolRef) -> Tool:
    """The tool an entry of `AgentConfig.tools` names, with the approval rule it sets."""
    if isinstance(entry, str):
        return load_tool(entry)
    rule = None if entry.approval is None else entry.approval == "required"
    return Tool.from_function(
        load_tool(entry.ref), requires_approval=rule, approval_timeout_s=entry.approval_timeout_s
    )


class AgentRuntime:
    """Runs agents: turns inputs into model and tool calls, budgets, memory, events, outputs."""

    def __init__(
        self,
        config: AgentConfig,
        model: ChatModel,
        tools: ToolRegistry,
        store: MediaStore,
        message_json: MessageJson | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.tools = tools
        self.store = store
        self.clock_ms: Callable[[], float] = lambda: time.time() * 1000
        """Wall clock `perform` bounds calls by (the engine's now_ms uses the same clock)."""
        self.documents = documents_message(config.documents, store)
        """The agent's documents, the first user message of every request (None: none)."""
        self.wants_events = config.event_log_level != "off" or config.telemetry is not None
        """Whether steps produce events: for the event log, or for the spans built from them."""
        self.followups = config.followups if config.followups.enabled else None
        """The bounds of `schedule_followup` when the agent has it (None: it does not)."""
        if self.followups is not None and FOLLOWUP_TOOL in tools:
            raise ValueError(
                f"a declared tool is named {FOLLOWUP_TOOL!r}, the built-in tool's name that "
                "followups.enabled gives the agent; rename it or turn followups off"
            )
        self.tool_specs = tools.specs() + ([tool_spec(self.followups)] if self.followups else [])
        """What the model is told about its tools: the declared ones and the built-in one."""
        self._names = [spec.name for spec in self.tool_specs]
        self.message_json = message_json or MessageJson()
        """Each message's JSON text, remembered: memory accounting, the SDK worker's requests."""

    @classmethod
    def from_config(cls, config: AgentConfig, model: ChatModel | None = None) -> AgentRuntime:
        """Build the model (unless one is given), tools and media store a config names."""
        store = MediaStore(config.media_store)
        spec = config.model
        options = dict(spec.options)
        if config.builtin_tools.enabled():
            options["builtin_tools"] = config.builtin_tools.enabled()
        cache = config.context_cache
        if cache.enabled:
            options["context_cache"] = ContextCacheSettings(
                ttl_s=cache.ttl_s,
                min_tokens=cache.min_tokens,
                display_name=f"streamagents {config.job_id}"[:128],
            )
        message_json = MessageJson()
        if model is None:
            model = create_model(spec.provider, spec.model, media_store=store, **options)
            if wants_worker(spec.sdk_process):
                model = SdkProcessModel(model, message_json)
        tools = ToolRegistry(
            [_declared_tool(entry) for entry in config.tools],
            timeout_s=config.tool_timeout_s,
            max_workers=config.max_in_flight,  # every run in flight may be in a sync tool
            max_result_bytes=config.max_tool_result_bytes,
        )
        return cls(config, model, tools, store, message_json)

    def parse(self, raw: str) -> InputRecord:
        """Parse an input line with this agent's key field (raises `InputError`)."""
        return parse_input(raw, self.config.key_field, self.config.input_limits)

    def history_expired(self, updated_ms: int | None, now_ms: int) -> bool:
        """Whether a key's history written at `updated_ms` has outlived the memory TTL."""
        return history_expired(updated_ms, now_ms, self.config.memory.ttl_seconds)

    # -- start -----------------------------------------------------------------------------

    def start(
        self,
        record: InputRecord,
        history: Sequence[ChatMessage],
        now_ms: int,
        waiting: Sequence[Followup] = (),
    ) -> Step:
        """Begin the run of `record`: offload its media, log the input, ask for a model call.

        `waiting` are the key's follow-ups waiting in keyed state: a new input (not a
        follow-up's) cancels them when `followups.cancel_on_input` is set (`Step.cancelled`)."""
        del history  # the run's request reads the history in perform; start changes none of it
        run_id = run_id_for(self.config.job_id, record.id)
        raw, raw_ref = self._keep_raw(record.raw)
        seed = RunState(
            run_id=run_id,
            input_id=record.id,
            key=record.key,
            started_ms=now_ms,
            messages=[],
            pending=ModelAction(request_event_id=event_id_for(run_id, 2)),
            attributes=record.attributes,
            raw=raw,
            raw_ref=raw_ref,
        )
        run = _Run(self, seed, now_ms)
        try:
            message = self.store.offload(record.message, self.config.offload_threshold_bytes)
            missing = [
                p.ref for p in message.media if p.ref is not None and not self.store.exists(p.ref)
            ]
            loggable = self.loggable(message)
        except Exception as exc:
            run.emit(
                "input", messages=[ChatMessage.user(record.message.content)], input_id=record.id
            )
            error = ErrorInfo(type="MediaStoreError", message=clip(str(exc)))
            return self._fail(run, error, dead_letter=True)
        input_event = run.emit("input", messages=[loggable], input_id=record.id)
        self._note_followups(run, record, waiting, input_event)
        if missing:
            digests = ", ".join(ref.sha256 for ref in missing)
            error = ErrorInfo(
                type="MediaNotFound",
                message=f"the media store {self.store.root!r} has no object for ref(s) {digests}",
            )
            return self._fail(run, error, dead_letter=True)
        run.data["messages"].append(message)
        request_id = self._request_model(run, upstream=input_event)
        return Step(
            state=run.snapshot(ModelAction(request_event_id=request_id)),
            events=run.events,
            cancelled=run.cancelled,
        )

    def _note_followups(
        self, run: _Run, record: InputRecord, waiting: Sequence[Followup], upstream: str
    ) -> None:
        """Log a follow-up's run as fired; cancel the key's waiting ones on a new input."""
        if is_followup_line(record.attributes):
            facts = record.attributes["followup"]
            due_ms = facts.get("due_ms")
            run.emit(
                "followup_fired",
                upstream=upstream,
                followup_id=str(facts.get("id", "")),
                scheduled_by=str(facts.get("run_id", "")),
                due_ms=due_ms if type(due_ms) is int else None,
                input_id=record.id,
            )
        elif self.followups is not None and self.followups.cancel_on_input and waiting:
            for followup in waiting:
                run.emit(
                    "followup_cancelled",
                    upstream=upstream,
                    followup_id=followup.id,
                    due_ms=followup.due_ms,
                    cancelled_by=record.id,
                )
            run.cancelled = [followup.id for followup in waiting]
            return
        run.data["followups_waiting"] = len(waiting)

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

    def _keep_raw(self, raw: str) -> tuple[str | None, MediaRef | None]:
        """Keep a small raw input in state; put a large one in the store and keep its ref."""
        encoded = raw.encode()
        if len(encoded) <= self.config.offload_threshold_bytes:
            return raw, None
        try:
            return None, self.store.put(encoded, "application/json")
        except Exception:
            return raw, None  # keeping it inline is the only way not to lose it

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

    def dead_letter(self, state: RunState, error: ErrorInfo) -> str:
        """The dead letter of a run that failed: `error` and the input as received.

        Reads the store when the input was large: the engine calls it off its task thread.
        """
        return dead_letter_record(
            "run", error, self.received_input(state), key=state.key, record_id=state.input_id
        )

    def _request_model(self, run: _Run, upstream: str) -> str:
        """Log a chat request (its new messages are in the events before it); returns its id."""
        return run.emit(
            "chat_request",
            upstream=upstream,
            model=self.config.model.model,
            provider=self.config.model.provider,
            tools=self._names,
        )

    # -- perform ---------------------------------------------------------------------------

    async def perform(self, state: RunState, history: Sequence[ChatMessage]) -> Outcome:
        """Do the pending action: one model call, or the turn's tool calls concurrently.

        Never raises: a failure, or the run deadline passing during the call, comes back as
        `Outcome.error`. Changes nothing, so it may be issued again for the same state."""
        pending = state.pending
        started = time.monotonic()
        deadline_ms = state.timeout_base_ms + self.config.budgets.run_timeout_s * 1000
        remaining_s = (deadline_ms - self.clock_ms()) / 1000
        model_turn = isinstance(pending, ModelAction)
        outcome: dict[str, Any] = {
            "kind": "model" if model_turn else "tools",
            "action_id": pending.request_event_id,
        }
        value: Any = None
        raised: BaseException | None = None
        try:
            if remaining_s <= 0:
                raise asyncio.TimeoutError
            if isinstance(pending, ModelAction):
                work = self._call_model(state, history)
            else:
                runnable = pending.runnable_calls
                outcome["call_ids"] = [call.id for call in runnable]
                work = self._run_tools(runnable)
            value, raised = await asyncio.wait_for(result_or_error(work), remaining_s)
        except asyncio.TimeoutError:
            outcome["error"] = ErrorInfo(type="RunTimeout", message="the run deadline passed")
        else:
            if raised is not None:
                message = clip(str(raised)) or type(raised).__name__
                outcome["error"] = ErrorInfo(type=type(raised).__name__, message=message)
                if isinstance(raised, ProviderError):
                    outcome.update(attempts=raised.attempts, retries=raised.retries)
            else:
                outcome["response" if model_turn else "results"] = value
        outcome["latency_ms"] = (time.monotonic() - started) * 1000
        return Outcome(**outcome)

    async def _call_model(self, state: RunState, history: Sequence[ChatMessage]) -> ChatResponse:
        request: list[ChatMessage] = []
        if self.config.system_prompt:
            request.append(ChatMessage.system(self.config.system_prompt))
        if self.documents is not None:
            request.append(self.documents)
        request.extend(history)
        request.extend(state.messages)
        generation = self.config.model.generation
        if state.interaction_id is not None:
            generation = {**generation, "previous_interaction_id": state.interaction_id}
        response = await self.model.achat(request, self.tool_specs, **generation)
        if has_inline_media_above(response.message, 0):
            message = await asyncio.to_thread(self.store.offload, response.message, 0)
            response = response.model_copy(update={"message": message})
        return response

    async def _run_tools(self, calls: Sequence[ToolCall]) -> list[ChatMessage]:
        results = await self.tools.run_all(calls)
        threshold = self.config.offload_threshold_bytes
        if not any(has_inline_media_above(r, threshold) for r in results):
            return results
        return await asyncio.to_thread(lambda: [self.store.offload(r, threshold) for r in results])

    # -- advance ---------------------------------------------------------------------------

    def advance(
        self,
        state: RunState,
        outcome: Outcome,
        now_ms: int,
        history: Sequence[ChatMessage] | None = None,
    ) -> Step:
        """Apply what `perform` returned and decide the next action, or finish the run.

        `history` is the key's current short-term history (the list given to `perform`); the
        new history of a finished run is computed from it, so pass it (None counts as empty).
        An outcome for an action other than the pending one is ignored (`Step.stale`)."""
        if (
            outcome.action_id != state.pending.request_event_id
            or outcome.kind != state.pending.kind
            or not _outcome_fits(state.pending, outcome)
        ):
            return Step(state=state, stale=True)
        run = _Run(self, state, now_ms)
        if outcome.error is not None and outcome.error.type == "RunTimeout":
            return self._fail(run, self._timeout_error(), dead_letter=False)
        if now_ms - state.timeout_base_ms >= self.config.budgets.run_timeout_s * 1000:
            return self._fail(run, self._timeout_error(), dead_letter=False)
        if isinstance(state.pending, ModelAction):
            return self._after_model(run, state.pending, outcome, history or [])
        return self._after_tools(run, state.pending, outcome)

    def _after_model(
        self,
        run: _Run,
        pending: ModelAction,
        outcome: Outcome,
        history: Sequence[ChatMessage],
    ) -> Step:
        data = run.data
        data["model_calls"] += 1
        if outcome.error is not None or outcome.response is None:
            error = outcome.error or ErrorInfo(type="EmptyResponse", message="no response")
            run.emit(
                "chat_response",
                upstream=pending.request_event_id,
                error_class=error.type,
                error_message=error.message,
                latency_ms=outcome.latency_ms,
                attempts=outcome.attempts,
                retries=outcome.retries,
            )
            return self._fail(run, error, dead_letter=True)
        response = outcome.response
        message = response.message
        data["input_tokens"] += response.usage.input_tokens
        data["output_tokens"] += response.usage.output_tokens
        data["cached_tokens"] += response.usage.cached_tokens
        data["messages"].append(message)
        data["interaction_id"] = response.interaction_id
        fallback = response.continuation_fallback
        response_id = run.emit(
            "chat_response",
            upstream=pending.request_event_id,
            messages=[message],
            usage=response.usage,
            model=response.model_version or self.config.model.model,
            latency_ms=outcome.latency_ms,
            finish_reason=response.finish_reason,
            interaction_id=response.interaction_id,
            continued_from=response.continued_from,
            attempts=len(response.retries) + 1,
            continuation_fallback=fallback,
            cached_content=response.cached_content,
            sources=sum(len(e.sources) for e in response.evidence) or None,
            retries=response.retries,
        )
        for evidence in response.evidence:
            run.emit("server_tool", upstream=response_id, evidence=[evidence])
        for facts in response.cache_events:  # the model's own facts, as text: read them
            run.emit(
                "context_cache",
                upstream=response_id,
                **typed_fields("context_cache", {"attributes": facts}),
            )
        if not message.tool_calls:
            return self._finish(run, message, history)
        budgets = self.config.budgets
        total_tokens = data["input_tokens"] + data["output_tokens"]
        if budgets.max_tokens is not None and total_tokens >= budgets.max_tokens:
            return self._fail(
                run,
                self._budget_error(
                    "max_tokens", budgets.max_tokens, f"the run used {total_tokens} tokens"
                ),
            )
        if data["model_calls"] >= budgets.max_model_calls:
            return self._fail(
                run,
                self._budget_error(
                    "max_model_calls",
                    budgets.max_model_calls,
                    "the model asked for tools after its last allowed call",
                ),
            )
        wanted = data["tool_calls"] + len(message.tool_calls)
        if wanted > budgets.max_tool_calls:
            return self._fail(
                run,
                self._budget_error(
                    "max_tool_calls",
                    budgets.max_tool_calls,
                    f"the model asked for {len(message.tool_calls)} more, {wanted} in all",
                ),
            )
        request_ids = [
            run.emit("tool_request", upstream=response_id, tool_calls=[call])
            for call in message.tool_calls
        ]
        approvals: list[PendingApproval] = []
        requests: list[str] = []
        for call, request_id in zip(message.tool_calls, request_ids, strict=True):
            found = self.tools.get(call.name)
            if found is None or not found.needs_approval(call.arguments):
                continue
            timeout_s = found.approval_timeout_s or self.config.approval_timeout_s
            approval = PendingApproval(
                call_id=request_id,
                tool_call_id=call.id,
                tool=call.name,
                requested_ms=run.now_ms,
                deadline_ms=run.now_ms + math.ceil(timeout_s * 1000),
            )
            approvals.append(approval)
            run.emit(
                "approval_requested",
                upstream=request_id,
                tool_calls=[call],
                call_id=request_id,
                deadline_ms=approval.deadline_ms,
            )
            requests.append(self._approval_request(run, call, approval))
        action = ToolAction(
            calls=list(message.tool_calls),
            request_event_ids=request_ids,
            approvals=approvals,
            done=self._schedule_followups(run, message.tool_calls, request_ids),
        )
        if len(action.done) == len(action.calls):
            return self._turn_done(run, action)
        return Step(state=run.snapshot(action), events=run.events, approval_requests=requests)

    def _schedule_followups(
        self, run: _Run, calls: Sequence[ToolCall], request_ids: Sequence[str]
    ) -> dict[str, ChatMessage]:
        """Answer the turn's `schedule_followup` calls at once (no tool runs): the follow-up
        joins the run's state, or the model reads why it was refused."""
        results: dict[str, ChatMessage] = {}
        if self.followups is None:
            return results
        for call, request_id in zip(calls, request_ids, strict=True):
            if call.name != FOLLOWUP_TOOL:
                continue
            kept: list[Followup] = run.data["followups"]
            made = schedule(
                self.followups,
                call.arguments,
                followup_id=request_id,
                key=run.data["key"],
                run_id=run.data["run_id"],
                now_ms=run.now_ms,
                waiting=run.data["followups_waiting"] + len(kept),
            )
            if isinstance(made, str):
                results[call.id] = ToolRegistry.error_result(call, made)
            else:
                run.data["followups"] = [*kept, made]
                run.emit(
                    "followup_scheduled",
                    upstream=request_id,
                    tool_calls=[call],
                    followup_id=made.id,
                    due_ms=made.due_ms,
                )
                results[call.id] = ChatMessage.tool_result(call.id, call.name, confirmation(made))
            run.emit("tool_response", upstream=request_id, tool_results=[results[call.id]])
        return results

    def _approval_request(self, run: _Run, call: ToolCall, approval: PendingApproval) -> str:
        """The approval request record of a call: what a person needs to decide on it."""
        said = [m.content for m in run.data["messages"] if m.role == "assistant" and m.content]
        record = {
            "call_id": approval.call_id,
            "tool_call_id": call.id,
            "run_id": run.data["run_id"],
            "input_id": run.data["input_id"],
            "key": run.data["key"],
            "tool": call.name,
            "arguments": call.arguments,
            "text": "\n".join(said),
            "requested_ms": approval.requested_ms,
            "deadline_ms": approval.deadline_ms,
        }
        return json.dumps(record, ensure_ascii=False)

    def _after_tools(self, run: _Run, pending: ToolAction, outcome: Outcome) -> Step:
        call_ids = outcome.call_ids or [call.id for call in pending.calls]
        if outcome.error is not None or len(outcome.results) != len(call_ids):
            error = outcome.error or ErrorInfo(
                type="ToolRunError",
                message=f"{len(outcome.results)} results for {len(call_ids)} tool calls",
            )
            return self._fail(run, error, dead_letter=True)
        results = dict(zip(call_ids, outcome.results, strict=True))
        return self._land(run, pending, results, outcome.latency_ms)

    def _land(
        self,
        run: _Run,
        pending: ToolAction,
        results: dict[str, ChatMessage],
        latency_ms: float | None,
        approvals: list[PendingApproval] | None = None,
        settled: dict[str, str] | None = None,
    ) -> Step:
        """Log results that came in; end the turn when every call has one, else wait on."""
        done = {**pending.done, **results}
        for call, request_id in zip(pending.calls, pending.request_event_ids, strict=True):
            if call.id in results:
                run.emit(
                    "tool_response",
                    upstream=request_id,
                    tool_results=[results[call.id]],
                    latency_ms=latency_ms,
                )
        action = pending.model_copy(
            update={
                "done": done,
                "approvals": pending.approvals if approvals is None else approvals,
            }
        )
        if len(done) < len(pending.calls):
            return Step(state=run.snapshot(action), events=run.events, settled=settled or {})
        step = self._turn_done(run, action)
        return step.model_copy(update={"settled": settled or {}})

    def _turn_done(self, run: _Run, pending: ToolAction) -> Step:
        """Every call of the turn has its result: add them in the model's order, go on."""
        data = run.data
        data["tool_calls"] += len(pending.calls)
        unknown = [call.name for call in pending.calls if call.name not in self._names]
        data["unknown_tool_calls"] += len(unknown)
        for call in pending.calls:
            data["messages"].append(pending.done[call.id])
        last = run.data["last_event_id"]
        budgets = self.config.budgets
        if data["unknown_tool_calls"] > budgets.max_unknown_tool_calls:
            names = ", ".join(repr(n) for n in unknown)
            error = ErrorInfo(
                type="UnknownTool",
                message=f"the model called unknown tool(s) {names}; "
                f"{data['unknown_tool_calls']} unknown calls exceed the "
                f"max_unknown_tool_calls={budgets.max_unknown_tool_calls}; "
                f"known tools: {', '.join(self._names) or 'none'}",
            )
            return self._fail(run, error, dead_letter=True)
        request_id = self._request_model(run, upstream=last)
        return Step(state=run.snapshot(ModelAction(request_event_id=request_id)), events=run.events)

    # -- endings ---------------------------------------------------------------------------

    # -- approvals -------------------------------------------------------------------------

    def decide(
        self,
        state: RunState | None,
        decision: ApprovalDecision,
        now_ms: int,
        settled: str | None = None,
        key: str | None = None,
    ) -> Step:
        """Apply a person's decision on a parked call of the key's run (`state`, None when
        the key has none). `settled` is what the engine remembers of the call from an
        earlier run: its decision's fingerprint, or `expired`; `key` names the key in a
        dead letter when there is no run.

        Approve: the call may run, with the decision's arguments if it edited them.
        Reject: its result is an error saying so, with the comment. A decision for an
        unknown, expired or otherwise decided call is a dead letter saying which; the same
        decision again is ignored (`Step.duplicate`)."""
        pending = state.pending if state is not None else None
        entry = pending.approval(decision.call_id) if isinstance(pending, ToolAction) else None
        if entry is None or entry.status != "waiting":
            before = settled if entry is None else (entry.fingerprint or entry.status)
            return self._refused(state, decision, before, key)
        assert state is not None and isinstance(pending, ToolAction)
        run = _Run(self, state, now_ms)
        call = _call_of(pending, entry.tool_call_id)
        upstream = pending.request_event_ids[pending.calls.index(call)]
        approved = decision.decision == "approve"
        edited = (
            approved and decision.arguments is not None and decision.arguments != call.arguments
        )
        if edited:
            call = call.model_copy(update={"arguments": decision.arguments})
        run.emit(
            "approval_decided",
            upstream=upstream,
            tool_calls=[call],
            call_id=entry.call_id,
            decision=decision.decision,
            by=clip(decision.by, 256),
            comment=clip(decision.comment),
            edited_arguments=edited,
        )
        fingerprint = decision.fingerprint()
        entry = entry.model_copy(
            update={"status": "approved" if approved else "rejected", "fingerprint": fingerprint}
        )
        approvals = [entry if a.call_id == entry.call_id else a for a in pending.approvals]
        settled_now = {entry.call_id: fingerprint}
        if approved:
            calls = [call if c.id == call.id else c for c in pending.calls]
            action = pending.model_copy(update={"calls": calls, "approvals": approvals})
            return Step(state=run.snapshot(action), events=run.events, settled=settled_now)
        who = f" by {decision.by}" if decision.by else ""
        reason = f": {decision.comment}" if decision.comment else ""
        result = ToolRegistry.error_result(
            call, f"the call was rejected{who}{reason}; it was not made"
        )
        return self._land(run, pending, {call.id: result}, None, approvals, settled_now)

    def expire(self, state: RunState, now_ms: int) -> Step:
        """Reject every waiting approval whose deadline has passed as timed out; the run
        goes on. With none due, the state comes back unchanged."""
        pending = state.pending
        if not isinstance(pending, ToolAction):
            return Step(state=state)
        due = [a for a in pending.waiting if a.deadline_ms <= now_ms]
        if not due:
            return Step(state=state)
        run = _Run(self, state, now_ms)
        results: dict[str, ChatMessage] = {}
        for entry in due:
            call = _call_of(pending, entry.tool_call_id)
            waited_s = (entry.deadline_ms - entry.requested_ms) / 1000
            run.emit(
                "approval_expired",
                upstream=pending.request_event_ids[pending.calls.index(call)],
                tool_calls=[call],
                call_id=entry.call_id,
                deadline_ms=entry.deadline_ms,
            )
            results[call.id] = ToolRegistry.error_result(
                call, f"no decision came within {waited_s:g} s; the call was not made"
            )
        expired = {a.call_id for a in due}
        approvals = [
            a.model_copy(update={"status": "expired"}) if a.call_id in expired else a
            for a in pending.approvals
        ]
        settled = dict.fromkeys(expired, "expired")
        return self._land(run, pending, results, None, approvals, settled)

    def abandon_parked(self, state: RunState, now_ms: int) -> Step:
        """End a parked run that can never be decided (its bounded input ended): an error
        output and a dead letter with its input, to run it again."""
        pending = state.pending
        ids = (
            ", ".join(a.call_id for a in pending.waiting) if isinstance(pending, ToolAction) else ""
        )
        error = ErrorInfo(
            type="ApprovalPending",
            message=f"the input ended while the run waited for a decision on call(s) {ids}",
        )
        return self._fail(_Run(self, state, now_ms), error, dead_letter=True)

    def _refused(
        self,
        state: RunState | None,
        decision: ApprovalDecision,
        before: str | None,
        key: str | None,
    ) -> Step:
        """A decision that applies to no waiting call: a duplicate, or a dead letter why."""
        if before is not None and before == decision.fingerprint():
            return Step(state=state, duplicate=True)
        if before is None:
            error = ErrorInfo(
                type="UnknownCall",
                message=f"no call {clip(decision.call_id, 256)!r} of this key waits for a decision",
            )
        elif before == "expired":
            error = ErrorInfo(
                type="ApprovalExpired",
                message=f"call {clip(decision.call_id, 256)!r} timed out waiting for a decision "
                "and was rejected; the decision came too late",
            )
        else:
            verdict = before.partition(":")[0]
            error = ErrorInfo(
                type="AlreadyDecided",
                message=f"call {clip(decision.call_id, 256)!r} was already decided "
                f"({verdict}) with other arguments or verdict; the first decision stands",
            )
        key = state.key if state is not None else key
        letter = dead_letter_record(
            "approval",
            error,
            json.dumps({"approval": decision.model_dump(exclude_none=True)}, ensure_ascii=False),
            key=key,
            record_id=decision.call_id,
        )
        return Step(state=state, dead_letter=letter)

    def timeout(self, state: RunState, now_ms: int) -> Step:
        """End the run because its run_timeout_s budget elapsed."""
        return self._fail(_Run(self, state, now_ms), self._timeout_error(), dead_letter=False)

    def _timeout_error(self) -> ErrorInfo:
        limit = self.config.budgets.run_timeout_s
        return self._budget_error("run_timeout_s", limit, f"the run took {limit:g} s or longer")

    @staticmethod
    def _budget_error(budget: str, limit: float, detail: str) -> ErrorInfo:
        return ErrorInfo(
            type="BudgetExceeded",
            message=f"budget {budget}={limit:g} exceeded: {detail}",
            budget=budget,
            limit=limit,
        )

    def _output(
        self, run: _Run, status: str, message: ChatMessage | None, error: ErrorInfo | None
    ) -> str:
        data = run.data
        parts = (
            [p.model_dump(mode="json") for p in message.parts]
            if message is not None and message.has_media
            else []
        )
        record = {
            "id": data["input_id"],
            "key": data["key"],
            "run_id": data["run_id"],
            "status": status,
            "text": message.content if message is not None else "",
            "parts": parts,
            "error": error.model_dump(exclude_none=True) if error is not None else None,
            "usage": {
                "input_tokens": data["input_tokens"],
                "output_tokens": data["output_tokens"],
                "cached_tokens": data["cached_tokens"],
            },
            "model_calls": data["model_calls"],
            "tool_calls": data["tool_calls"],
            "latency_ms": max(0, run.now_ms - data["started_ms"]),
            "attributes": data["attributes"],
        }
        return json.dumps(record, ensure_ascii=False)

    def _finish(self, run: _Run, message: ChatMessage, history: Sequence[ChatMessage]) -> Step:
        output = self._output(run, "ok", message, None)
        run.emit("output", messages=[message], input_id=run.data["input_id"], status="ok")
        memory = self.config.memory
        trimmed = trim_history(
            [*history, *run.data["messages"]],
            memory.max_messages,
            memory.max_bytes,
            self.message_json.size,
        )
        if trimmed.trimmed:
            run.emit(
                "memory_trimmed",
                dropped_messages=trimmed.dropped_messages,
                dropped_bytes=trimmed.dropped_bytes,
                kept_messages=len(trimmed.messages),
                kept_bytes=trimmed.kept_bytes,
            )
        return Step(
            state=None,
            events=run.events,
            output=output,
            history=trimmed.messages,
            followups=run.data["followups"],
            cancelled=run.cancelled,
        )

    def _fail(self, run: _Run, error: ErrorInfo, dead_letter: bool = False) -> Step:
        budget = {} if error.budget is None else {"budget": error.budget, "limit": error.limit}
        run.emit(
            "budget_exceeded" if error.budget is not None else "error",
            error_class=error.type,
            error_message=error.message,
            input_id=run.data["input_id"],
            **budget,
        )
        output = self._output(run, "error", None, error)
        run.emit("output", input_id=run.data["input_id"], status="error")
        letter = self.dead_letter(run.state, error) if dead_letter else None
        return Step(
            state=None,
            events=run.events,
            output=output,
            dead_letter=letter,
            followups=run.data["followups"],
            cancelled=run.cancelled,
        )

    async def aclose(self) -> None:
        """Close the model client and the tools' thread pool."""
        self.tools.close()
        await self.model.aclose()
