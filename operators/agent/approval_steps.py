"""The steps of a parked run: a person's decision applied, approvals expired at their
deadline, a run abandoned when no decision can come, and decisions refused with a dead
letter that says why. `AgentRuntime.decide`, `expire` and `abandon_parked` run these.

A decision may change a call's arguments only when its tool allows edits (`allow_edits`),
and name its call by tool only when its tool allows that (`by_tool_name`); otherwise it is
a dead letter and the call still waits for a decision that may be taken."""

from __future__ import annotations

import json

from streamagents.operators.agent._run_draft import RunDraft
from streamagents.operators.agent.approvals import ApprovalDecision, waiting_matches
from streamagents.operators.agent.emitted_records import DeadLetter
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_context import RunContext
from streamagents.operators.agent.run_endings import fail
from streamagents.operators.agent.run_state import (
    Duplicate,
    RunState,
    Step,
    ToolAction,
    Unchanged,
    goes_on,
)
from streamagents.operators.agent.tool_turn import call_of, record_results
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.serde.event_payloads import ApprovalDecidedPayload, ApprovalExpiredPayload
from streamagents.serde.messages import ChatMessage
from streamagents.serde.safe_text import clip

__all__ = ["abandon_parked", "decide", "expire", "name_the_call"]


def decide(
    context: RunContext,
    state: RunState | None,
    decision: ApprovalDecision,
    now_ms: int,
    settled: str | None = None,
    key: str | None = None,
) -> Step:
    """Apply a person's decision on a parked call (see `AgentRuntime.decide`)."""
    pending = state.pending if state is not None else None
    entry = pending.approval(decision.call_id) if isinstance(pending, ToolAction) else None
    if entry is None or entry.status != "waiting":
        before = settled if entry is None else (entry.fingerprint or entry.status)
        return _refusal(state, decision, before, key)
    assert state is not None and isinstance(pending, ToolAction)
    run = RunDraft(context, state, now_ms)
    call = call_of(pending, entry.tool_call_id)
    upstream = pending.request_event_ids[pending.calls.index(call)]
    approved = decision.decision == "approve"
    edited = approved and decision.arguments is not None and decision.arguments != call.arguments
    tool = context.tools.get(entry.tool)
    if edited and (tool is None or not tool.allow_edits):
        error = ErrorInfo(
            type="EditNotAllowed",
            message=f"tool {clip(entry.tool, 256)!r} does not allow a decision to change its "
            f"arguments (allow_edits); call {entry.call_id!r} still waits for a decision",
        )
        return Unchanged(
            state=state, dead_letter=_letter(decision, error, state.key, entry.call_id)
        )
    if edited:
        call = call.model_copy(update={"arguments": decision.arguments})
    run.emit(
        ApprovalDecidedPayload(
            tool_calls=[call],
            call_id=entry.call_id,
            decision=decision.decision,
            by=clip(decision.by, 256),
            comment=clip(decision.comment),
            edited_arguments=edited,
        ),
        upstream=upstream,
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
        return goes_on(run.snapshot(action), run.events, settled=settled_now)
    who = f" by {decision.by}" if decision.by else ""
    reason = f": {decision.comment}" if decision.comment else ""
    result = ToolRegistry.error_result(call, f"the call was rejected{who}{reason}; it was not made")
    return record_results(run, pending, {call.id: result}, None, approvals, settled_now)


def name_the_call(
    tools: ToolRegistry, decision: ApprovalDecision, states: list[RunState], key: str
) -> ApprovalDecision | Unchanged:
    """A decision that names its call by tool and arguments, given the `call_id` of the one
    waiting call of the key's runs (`states`) it fits; when its tool does not allow that
    (`by_tool_name`), or none or several calls fit, a step whose dead letter says so
    (`CallIdRequired`, `UnknownCall`, `AmbiguousDecision`)."""
    tool = clip(str(decision.tool), 256)
    named = tools.get(str(decision.tool))
    if named is None or not named.by_tool_name:
        error = ErrorInfo(
            type="CallIdRequired",
            message=f"tool {tool!r} does not allow a decision to name its call by the tool "
            "(by_tool_name); name the call_id of its approval request",
        )
        return Unchanged(state=None, dead_letter=_letter(decision, error, key, None))
    waiting = [
        (entry, call_of(state.pending, entry.tool_call_id).arguments)
        for state in states
        if isinstance(state.pending, ToolAction)
        for entry in state.pending.waiting
    ]
    found = waiting_matches(decision, waiting)
    if len(found) == 1:
        return decision.model_copy(update={"call_id": found[0]})
    fields = ", ".join(sorted(decision.match or {}))
    which = f"call of {tool!r}" + (f" with the given {fields}" if fields else "")
    if found:
        error = ErrorInfo(
            type="AmbiguousDecision",
            message=f"{len(found)} waiting calls of {tool!r} fit this decision (call ids "
            f"{', '.join(found)}); add arguments to `match` or name the `call_id`",
        )
    else:
        error = ErrorInfo(
            type="UnknownCall", message=f"no {which} of this key waits for a decision"
        )
    return Unchanged(state=None, dead_letter=_letter(decision, error, key, None))


def expire(context: RunContext, state: RunState, now_ms: int) -> Step:
    """Reject every waiting approval whose deadline has passed (see `AgentRuntime.expire`)."""
    pending = state.pending
    if not isinstance(pending, ToolAction):
        return Unchanged(state=state)
    due = [a for a in pending.waiting if a.deadline_ms <= now_ms]
    if not due:
        return Unchanged(state=state)
    run = RunDraft(context, state, now_ms)
    results: dict[str, ChatMessage] = {}
    for entry in due:
        call = call_of(pending, entry.tool_call_id)
        waited_s = (entry.deadline_ms - entry.requested_ms) / 1000
        run.emit(
            ApprovalExpiredPayload(
                tool_calls=[call], call_id=entry.call_id, deadline_ms=entry.deadline_ms
            ),
            upstream=pending.request_event_ids[pending.calls.index(call)],
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
    return record_results(run, pending, results, None, approvals, settled)


def abandon_parked(context: RunContext, state: RunState, now_ms: int) -> Step:
    """End a parked run that can never be decided (see `AgentRuntime.abandon_parked`)."""
    pending = state.pending
    ids = ", ".join(a.call_id for a in pending.waiting) if isinstance(pending, ToolAction) else ""
    error = ErrorInfo(
        type="ApprovalPending",
        message=f"the input ended while the run waited for a decision on call(s) {ids}",
    )
    return fail(RunDraft(context, state, now_ms), error, dead_letter=True)


def _refusal(
    state: RunState | None,
    decision: ApprovalDecision,
    before: str | None,
    key: str | None,
) -> Step:
    """A decision that applies to no waiting call: a duplicate, or a dead letter why."""
    if before is not None and before == decision.fingerprint():
        return Duplicate(state=state)
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
    return Unchanged(state=state, dead_letter=_letter(decision, error, key, decision.call_id))


def _letter(
    decision: ApprovalDecision, error: ErrorInfo, key: str | None, call_id: str | None
) -> DeadLetter:
    """The dead letter of a refused decision: why, and the decision as it came."""
    return DeadLetter.build(
        "approval",
        error,
        json.dumps({"approval": decision.model_dump(exclude_none=True)}, ensure_ascii=False),
        key=key,
        record_id=call_id,
    )
