"""The agent runtime: one run per input, a state machine the Flink engine drives step by step.

A run goes input → model call → (tool calls → model call)* → output. The engine calls:

- `start(record, history, now_ms)` when a key's next input begins its run (task thread);
- `perform(state, history)` on its asyncio loop: the pending model call, or all pending tool
  calls concurrently; it never raises and changes nothing in the run, so it may be
  re-issued after a restore (with the call journal on, a call that completed is answered
  from it, `durable_calls`);
- `advance(state, outcome, now_ms, history)` with what `perform` returned (task thread);
- `timeout(state, now_ms)` when the run's timer fires before it finished;
- `decide`, `expire` and `abandon_parked` on a run parked for approvals (`approval_steps`).

Each returns a `Step` (`run_state`), one kind per answer to "what next?": `Continue`,
`Park`, `Defer` (with the new `RunState`), `Finish` (the output record, maybe a dead
letter, the key's new short-term history), `Stale`, `Duplicate` or `Unchanged`; every kind
carries the event-log records to emit. Every state change and every event happens in
start/advance/timeout and the approval steps, and event ids derive from (run_id,
sequence), with run_id derived from the input id, so a step repeated after recovery
produces the same records. A model reply is applied in `model_turn`, tool results in
`tool_turn`, a run ends in `run_endings`; those steps read the agent through its
`RunContext` (`run_context`), never the runtime; `runtime_parts` builds what `from_config`
needs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from streamagents.connectors.call_journal import CallJournal
from streamagents.connectors.media import MediaStore, has_inline_media_above
from streamagents.connectors.providers import ChatModel, ProviderError
from streamagents.operators.agent import approval_steps
from streamagents.operators.agent._result_or_error import result_or_error
from streamagents.operators.agent._run_draft import RunDraft
from streamagents.operators.agent._run_events import event_id_for
from streamagents.operators.agent.approvals import ApprovalDecision
from streamagents.operators.agent.config import AgentConfig, tenant_of
from streamagents.operators.agent.documents import documents_message
from streamagents.operators.agent.durable_calls import (
    DurableCalls,
    ModelAnswer,
    ToolAnswers,
    call_id,
    model_request_hash,
)
from streamagents.operators.agent.fingerprint import config_fingerprint
from streamagents.operators.agent.followups import TOOL_NAME as FOLLOWUP_TOOL
from streamagents.operators.agent.followups import Followup, is_followup_line, tool_spec
from streamagents.operators.agent.model_turn import apply_model_outcome
from streamagents.operators.agent.records import (
    ErrorInfo,
    InputRecord,
    offload_input,
    parse_input,
)
from streamagents.operators.agent.replay import (
    REPLAY_OF_FIELD,
    REPLAY_TOOLS_FIELD,
    ReplayPolicy,
    answer_from_recording,
    replay_run_id,
)
from streamagents.operators.agent.run_context import RunContext
from streamagents.operators.agent.run_endings import fail, timeout_error
from streamagents.operators.agent.run_state import (
    Continue,
    Defer,
    Finish,
    ModelAction,
    Outcome,
    RunState,
    Stale,
    Step,
    ToolAction,
    run_id_for,
)
from streamagents.operators.agent.runtime_parts import runtime_parts
from streamagents.operators.agent.tool_context import ToolContext, idempotency_key
from streamagents.operators.agent.tool_turn import apply_tool_outcome, outcome_fits
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.serde.chat import ChatResponse
from streamagents.serde.event_payloads import (
    BudgetDeferredPayload,
    FollowupCancelledPayload,
    FollowupFiredPayload,
    InputPayload,
)
from streamagents.serde.message_json import MessageJson
from streamagents.serde.messages import ChatMessage, MediaRef, ToolCall
from streamagents.serde.safe_text import clip

__all__ = ["AgentRuntime"]


class AgentRuntime:
    """Runs agents: turns inputs into model and tool calls, budgets, memory, events, outputs."""

    def __init__(
        self,
        config: AgentConfig,
        model: ChatModel,
        tools: ToolRegistry,
        store: MediaStore,
        message_json: MessageJson | None = None,
        journal: CallJournal | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.tools = tools
        self.clock_ms: Callable[[], float] = lambda: time.time() * 1000
        """Wall clock `perform` bounds calls by (the engine's now_ms uses the same clock)."""
        self.documents = documents_message(config.documents, store)
        """The agent's documents, the first user message of every request (None: none)."""
        followups = config.followups if config.followups.enabled else None
        if followups is not None and FOLLOWUP_TOOL in tools:
            raise ValueError(
                f"a declared tool is named {FOLLOWUP_TOOL!r}, the built-in tool's name that "
                "followups.enabled gives the agent; rename it or turn followups off"
            )
        self.tool_specs = tools.specs() + ([tool_spec(followups)] if followups else [])
        """What the model is told about its tools: the declared ones and the built-in one."""
        self.context = RunContext(
            config=config,
            tools=tools,
            store=store,
            tool_names=[spec.name for spec in self.tool_specs],
            followups=followups,
            wants_events=config.event_log_level != "off" or config.telemetry is not None,
            message_json=message_json or MessageJson(),
        )
        """What the run's steps read: settings, tools, the media store."""
        self.fingerprint = config_fingerprint(config, self.tool_specs)
        """The hash of what shapes the answers (prompt, models, tools), on each input event."""
        self.replay_policies = _replay_policies(config, tools) if config.replay else None
        """In a replay job, each tool's policy for calls the recording lacks (else None)."""
        settings = config.journal
        self.durable = (
            DurableCalls(
                journal, config.job_id, lambda: self.clock_ms(), settings.roll_s, settings.keep_s
            )
            if journal is not None
            else None
        )
        """The call journal's look-ups and records around each call (None: no journal)."""
        self.attempt = 0
        """The subtask's attempt (0 at first, more after restarts), for tools' contexts."""

    @property
    def store(self) -> MediaStore:
        """The media store the runs keep their media and large inputs in."""
        return self.context.store

    @store.setter
    def store(self, store: MediaStore) -> None:
        self.context.store = store

    @classmethod
    def from_config(cls, config: AgentConfig, model: ChatModel | None = None) -> AgentRuntime:
        """Build the model (unless one is given), tools and media store a config names."""
        return cls(config, *runtime_parts(config, model))

    def parse(self, raw: str) -> InputRecord:
        """Parse an input line with this agent's key field (raises `InputError`)."""
        return parse_input(raw, self.config.key_field, self.config.input_limits)

    # -- start -----------------------------------------------------------------------------

    def start(
        self,
        record: InputRecord,
        history: Sequence[ChatMessage],
        now_ms: int,
        waiting: Sequence[Followup] = (),
        key_sequence: int | None = None,
    ) -> Continue | Finish:
        """Begin the run of `record`: offload its media, log the input, ask for a model call.

        `waiting` are the key's follow-ups waiting in keyed state: a new input (not a
        follow-up's) cancels them when `followups.cancel_on_input` is set (the step's `cancelled`).
        `key_sequence` is the run's position among its key's runs (the engine counts them in
        keyed state). In a replay job the run is a replay of `record.replay_of`."""
        del history  # the run's request reads the history in perform; start changes none of it
        replay = self.replay_policies is not None
        if replay:
            run_id = replay_run_id(self.config.job_id, record.id)
        else:
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
            replay_of=record.replay_of if replay else None,
            recorded_tools=record.recorded_tools if replay else [],
        )
        run = RunDraft(self.context, seed, now_ms)
        try:
            message = self.store.offload(record.message, self.config.offload_threshold_bytes)
            missing = [
                p.ref for p in message.media if p.ref is not None and not self.store.exists(p.ref)
            ]
            loggable = self.context.loggable(message)
        except Exception as exc:
            run.emit(
                InputPayload(
                    messages=[ChatMessage.user(record.message.content)], input_id=record.id
                )
            )
            error = ErrorInfo(type="MediaStoreError", message=clip(str(exc)))
            return fail(run, error, dead_letter=True)
        input_event = run.emit(
            InputPayload(
                messages=[loggable],
                input_id=record.id,
                input_record=self._loggable_line(record) if self.context.wants_events else None,
                key_sequence=key_sequence,
                config_fingerprint=self.fingerprint,
            )
        )
        self._note_followups(run, record, waiting, input_event)
        if missing:
            digests = ", ".join(ref.sha256 for ref in missing)
            error = ErrorInfo(
                type="MediaNotFound",
                message=f"the media store {self.store.shown_root!r} has no object for "
                f"ref(s) {digests}",
            )
            return fail(run, error, dead_letter=True)
        run.data["messages"].append(message)
        request_id = run.request_model(upstream=input_event)
        return Continue(
            state=run.snapshot(ModelAction(request_event_id=request_id)),
            events=run.events,
            cancelled=run.cancelled,
        )

    def _note_followups(
        self, run: RunDraft, record: InputRecord, waiting: Sequence[Followup], upstream: str
    ) -> None:
        """Log a follow-up's run as fired; cancel the key's waiting ones on a new input."""
        if is_followup_line(record.raw):
            facts = record.attributes["followup"]
            due_ms = facts.get("due_ms")
            run.emit(
                FollowupFiredPayload(
                    followup_id=str(facts.get("id", "")),
                    scheduled_by=str(facts.get("run_id", "")),
                    due_ms=due_ms if type(due_ms) is int else None,
                    input_id=record.id,
                ),
                upstream=upstream,
            )
        elif (
            self.context.followups is not None
            and self.context.followups.cancel_on_input
            and waiting
        ):
            for followup in waiting:
                run.emit(
                    FollowupCancelledPayload(
                        followup_id=followup.id, due_ms=followup.due_ms, cancelled_by=record.id
                    ),
                    upstream=upstream,
                )
            run.cancelled = [followup.id for followup in waiting]
            return
        run.data["followups_waiting"] = len(waiting)

    def _loggable_line(self, record: InputRecord) -> str:
        """The input line as the log keeps it: inline media as store refs, a replay line
        without its replay fields. Should the store fail, the line without its parts."""
        line = record.raw
        if has_inline_media_above(record.message, 0):
            try:
                line = offload_input(record, self.store, 0)
            except Exception:
                obj = json.loads(line)
                obj.pop("parts", None)
                line = json.dumps(obj, ensure_ascii=False)
        if record.replay_of is not None:
            obj = json.loads(line)
            obj.pop(REPLAY_OF_FIELD, None)
            obj.pop(REPLAY_TOOLS_FIELD, None)
            line = json.dumps(obj, ensure_ascii=False)
        return line

    def _keep_raw(self, raw: str) -> tuple[str | None, MediaRef | None]:
        """Keep a small raw input in state; put a large one in the store and keep its ref."""
        encoded = raw.encode()
        if len(encoded) <= self.config.offload_threshold_bytes:
            return raw, None
        try:
            return None, self.store.put(encoded, "application/json")
        except Exception:
            return raw, None  # keeping it inline is the only way not to lose it

    # -- perform ---------------------------------------------------------------------------

    async def perform(self, state: RunState, history: Sequence[ChatMessage]) -> Outcome:
        """Do the pending action: one model call, or the turn's tool calls concurrently.

        Never raises: a failure, or the run deadline passing during the call, comes back as
        `Outcome.error`. Changes nothing, so it may be issued again for the same state."""
        pending = state.pending
        started = time.monotonic()
        deadline_ms = state.deadline_ms(self.config.budgets.run_timeout_s)
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
                work = self._run_tools(runnable, state)
            value, raised = await asyncio.wait_for(result_or_error(work), remaining_s)
        except asyncio.TimeoutError:
            outcome["error"] = ErrorInfo(type="RunTimeout", message="the run deadline passed")
        else:
            if raised is not None:
                message = clip(str(raised)) or type(raised).__name__
                outcome["error"] = ErrorInfo(type=type(raised).__name__, message=message)
                if isinstance(raised, ProviderError):
                    outcome.update(attempts=raised.attempts, retries=raised.retries)
            elif isinstance(value, ModelAnswer):
                outcome["response"] = value.response
                outcome["from_journal"] = [pending.request_event_id] if value.from_journal else []
                outcome["unrecorded"] = 0 if value.recorded else 1
            else:
                outcome.update(
                    results=value.results,
                    from_journal=value.from_journal,
                    unrecorded=value.unrecorded,
                )
        outcome["latency_ms"] = (time.monotonic() - started) * 1000
        return Outcome(**outcome)

    async def _call_model(self, state: RunState, history: Sequence[ChatMessage]) -> ModelAnswer:
        """The pending model call's response: from the call journal when it holds it."""
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

        async def call() -> ChatResponse:
            response = await self.model.achat(request, self.tool_specs, **generation)
            if has_inline_media_above(response.message, 0):
                message = await asyncio.to_thread(self.store.offload, response.message, 0)
                response = response.model_copy(update={"message": message})
            return response

        if self.durable is None:
            return ModelAnswer(await call(), from_journal=False, recorded=True)
        hashed = model_request_hash(self.fingerprint, request, generation)
        return await self.durable.model_call(
            state.run_id, state.pending.request_event_id, hashed, call
        )

    async def _run_tools(self, calls: Sequence[ToolCall], state: RunState) -> ToolAnswers:
        """The results of the turn's runnable `calls`, each run with its `ToolContext`: from
        the call journal when it holds them, else run (in a replay job: answered from the
        recording unless live)."""
        pending = state.pending
        assert isinstance(pending, ToolAction)
        action_id = pending.request_event_id
        index = {call.id: i for i, call in enumerate(pending.calls)}
        contexts = {call.id: self._tool_context(state, index[call.id]) for call in calls}

        async def run(todo: Sequence[ToolCall]) -> list[ChatMessage]:
            return await self._run_and_offload(todo, contexts, state)

        if self.durable is None:
            return ToolAnswers(await run(calls), [], 0)
        indexed = [(index[call.id], call) for call in calls]
        return await self.durable.tool_calls(state.run_id, action_id, indexed, run)

    def _tool_context(self, state: RunState, index: int) -> ToolContext:
        """The context of the `index`th tool call of the run's pending action."""
        config = self.config
        identity = call_id(config.job_id, state.run_id, state.pending.request_event_id, index)
        return ToolContext(
            idempotency_key=idempotency_key(identity),
            run_id=state.run_id,
            input_id=state.input_id,
            key=state.key,
            tenant=tenant_of(config.budgets, config.key_field, state.key, state.attributes),
            attempt=self.attempt,
        )

    async def _run_and_offload(
        self, calls: Sequence[ToolCall], contexts: dict[str, ToolContext], state: RunState
    ) -> list[ChatMessage]:
        """Run the calls with their contexts (by call id); their results' media above the
        offload threshold go to the store."""

        async def live(todo: Sequence[ToolCall]) -> list[ChatMessage]:
            return await self.tools.run_all(todo, [contexts[call.id] for call in todo])

        if self.replay_policies is not None:  # a replay job runs no tool unless it may
            results = await answer_from_recording(
                calls,
                state.recorded_tools,
                self.replay_policies,
                state.replay_of or "(none named)",
                live,
                self.tools.error_result,
            )
        else:
            results = await live(calls)
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
        An outcome for an action other than the pending one is ignored (`Stale`)."""
        if (
            outcome.action_id != state.pending.request_event_id
            or outcome.kind != state.pending.kind
            or not outcome_fits(state.pending, outcome)
        ):
            return Stale(state=state)
        run = RunDraft(self.context, state, now_ms)
        if outcome.error is not None and outcome.error.type == "RunTimeout":
            return fail(run, timeout_error(self.config), dead_letter=False)
        if now_ms >= state.deadline_ms(self.config.budgets.run_timeout_s):
            return fail(run, timeout_error(self.config), dead_letter=False)
        if isinstance(state.pending, ModelAction):
            return apply_model_outcome(run, state.pending, outcome, history or [])
        return apply_tool_outcome(run, state.pending, outcome)

    def timeout(self, state: RunState, now_ms: int) -> Finish:
        """End the run because its run_timeout_s budget elapsed."""
        run = RunDraft(self.context, state, now_ms)
        return fail(run, timeout_error(self.config), dead_letter=False)

    def refuse(self, state: RunState, error: ErrorInfo, now_ms: int) -> Finish:
        """End the run before its next model call, which a spend budget (or its input's
        missing tenant) does not allow: an error output and a dead letter with its input."""
        return fail(RunDraft(self.context, state, now_ms), error, dead_letter=True)

    def defer(
        self,
        state: RunState,
        budget: str,
        limit: float,
        window_s: float,
        until_ms: int,
        now_ms: int,
    ) -> Defer:
        """Log that the run waits until `until_ms` for `budget`'s window to have room; its
        pending model call is made then."""
        run = RunDraft(self.context, state, now_ms)
        run.emit(
            BudgetDeferredPayload(
                input_id=state.input_id,
                budget=budget,
                limit=limit,
                window_s=window_s,
                until_ms=until_ms,
            )
        )
        return Defer(state=run.snapshot(state.pending), events=run.events)

    # -- a run parked for approvals (approval_steps) -----------------------------------------

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
        decision again is ignored (`Duplicate`)."""
        return approval_steps.decide(self.context, state, decision, now_ms, settled, key)

    def expire(self, state: RunState, now_ms: int) -> Step:
        """Reject every waiting approval whose deadline has passed as timed out; the run
        goes on. With none due, the state comes back unchanged."""
        return approval_steps.expire(self.context, state, now_ms)

    def abandon_parked(self, state: RunState, now_ms: int) -> Finish:
        """End a parked run that can never be decided (its bounded input ended): an error
        output and a dead letter with its input, to run it again."""
        return approval_steps.abandon_parked(self.context, state, now_ms)

    async def aclose(self) -> None:
        """Close the model client, the tools' thread pool and the call journal's segment."""
        if self.durable is not None:
            self.durable.journal.roll()
        self.tools.close()
        await self.model.aclose()


def _replay_policies(config: AgentConfig, tools: ToolRegistry) -> dict[str, ReplayPolicy]:
    """Each tool's replay policy: a declared tool's own, `live` for the tools of an MCP
    server a replay starts (only `replay: live` ones are); a ValueError when a tool that
    needs approval (as declared in the spec or by the tool itself) is set to `live`."""
    declared = [name for name in tools.names if not tools.origin(name)]
    policies: dict[str, ReplayPolicy] = {name: "live" for name in tools.names if tools.origin(name)}
    if len(config.tools) != len(declared):  # a registry given apart from the config's entries
        return {**dict.fromkeys(declared, "recorded"), **policies}
    for entry, name in zip(config.tools, declared, strict=True):
        if isinstance(entry, str):
            policies[name] = "recorded"
            continue
        found = tools.get(name)
        if entry.replay == "live" and found is not None and found.requires_approval:
            raise ValueError(
                f"tool {name!r}: replay: live is refused for a tool whose calls need approval"
            )
        policies[name] = entry.replay
    return policies
