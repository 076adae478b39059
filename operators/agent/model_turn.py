"""A model reply applied to a run: its usage and events, the answer that ends the run, or
the tool calls it asks for — checked against the budgets, each logged, those that need a
person's decision parked with an approval request, `schedule_followup` answered at once."""

from __future__ import annotations

import math
from collections.abc import Sequence

from streamagents.operators.agent._run_draft import RunDraft
from streamagents.operators.agent.approvals import PendingApproval
from streamagents.operators.agent.call_cost import call_cost_usd
from streamagents.operators.agent.emitted_records import ApprovalRequest
from streamagents.operators.agent.followups import TOOL_NAME as FOLLOWUP_TOOL
from streamagents.operators.agent.followups import Followup, confirmation, schedule
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_endings import budget_error, fail, finish
from streamagents.operators.agent.run_state import ModelAction, Outcome, Step, ToolAction, goes_on
from streamagents.operators.agent.tool_turn import end_tool_turn
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.serde.chat import AnsweredBy
from streamagents.serde.event_payloads import (
    ApprovalRequestedPayload,
    ChatResponsePayload,
    ContextCachePayload,
    FollowupScheduledPayload,
    ServerToolPayload,
    ToolRequestPayload,
    ToolResponsePayload,
)
from streamagents.serde.event_storage import typed_fields
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = ["apply_model_outcome"]


def apply_model_outcome(
    run: RunDraft, pending: ModelAction, outcome: Outcome, history: Sequence[ChatMessage]
) -> Step:
    """Take the model's reply (or its failure, which ends the run with a dead letter):
    finish on an answer, else start the turn of the tool calls it asks for."""
    data = run.data
    data["model_calls"] += 1
    if outcome.error is not None or outcome.response is None:
        error = outcome.error or ErrorInfo(type="EmptyResponse", message="no response")
        run.emit(
            ChatResponsePayload(
                error_class=error.type,
                error_message=error.message,
                latency_ms=outcome.latency_ms,
                attempts=outcome.attempts,
                retries=outcome.retries,
            ),
            upstream=pending.request_event_id,
        )
        return fail(run, error, dead_letter=True)
    response = outcome.response
    message = response.message
    data["input_tokens"] += response.usage.input_tokens
    data["output_tokens"] += response.usage.output_tokens
    data["cached_tokens"] += response.usage.cached_tokens
    cost = call_cost_usd(run.context.config.model, response)
    data["call_costs_usd"] = [*data["call_costs_usd"], cost]
    data["messages"].append(message)
    data["interaction_id"] = response.interaction_id
    spec = run.context.config.model
    answered = response.answered_by or AnsweredBy(provider=spec.provider, model=spec.model)
    data["answered_by"] = answered
    response_id = run.emit(
        ChatResponsePayload(
            messages=run.loggable([message]),
            usage=response.usage,
            model=response.model_version or answered.model,
            answered_provider=answered.provider,
            fallback=answered.fallback,
            passed_over=response.passed_over or None,
            latency_ms=outcome.latency_ms,
            finish_reason=response.finish_reason,
            interaction_id=response.interaction_id,
            continued_from=response.continued_from,
            attempts=len(response.retries) + 1,
            cost_usd=cost,
            continuation_fallback=response.continuation_fallback,
            cached_content=response.cached_content,
            sources=sum(len(e.sources) for e in response.evidence) or None,
            retries=response.retries,
            from_journal=True if outcome.from_journal else None,
        ),
        upstream=pending.request_event_id,
    )
    for evidence in response.evidence:
        run.emit(ServerToolPayload(evidence=[evidence]), upstream=response_id)
    for facts in response.cache_events:  # the model's own facts, as text: read them
        run.emit(
            ContextCachePayload(**typed_fields("context_cache", {"attributes": facts})),
            upstream=response_id,
        )
    if not message.tool_calls:
        return finish(run, message, history)
    over = _over_budget(run, len(message.tool_calls))
    if over is not None:
        return fail(run, over)
    return _start_tool_turn(run, message.tool_calls, response_id)


def _over_budget(run: RunDraft, asked: int) -> ErrorInfo | None:
    """The budget a reply asking for `asked` tool calls breaks, if any."""
    data = run.data
    budgets = run.context.config.budgets
    total_tokens = data["input_tokens"] + data["output_tokens"]
    if budgets.max_tokens is not None and total_tokens >= budgets.max_tokens:
        return budget_error("max_tokens", budgets.max_tokens, f"the run used {total_tokens} tokens")
    if data["model_calls"] >= budgets.max_model_calls:
        return budget_error(
            "max_model_calls",
            budgets.max_model_calls,
            "the model asked for tools after its last allowed call",
        )
    wanted = data["tool_calls"] + asked
    if wanted > budgets.max_tool_calls:
        return budget_error(
            "max_tool_calls",
            budgets.max_tool_calls,
            f"the model asked for {asked} more, {wanted} in all",
        )
    return None


def _start_tool_turn(run: RunDraft, calls: Sequence[ToolCall], response_id: str) -> Step:
    """Log each call, park those that need a decision (with their approval requests; never
    in a replay, where the recording answers them), answer `schedule_followup`; the turn
    ends at once when nothing is left to run."""
    context = run.context
    request_ids = [
        run.emit(
            ToolRequestPayload(tool_calls=[c], **context.tools.origin(c.name)), upstream=response_id
        )
        for c in calls
    ]
    approvals: list[PendingApproval] = []
    requests: list[ApprovalRequest] = []
    for call, request_id in zip(calls, request_ids, strict=True):
        found = context.tools.get(call.name)
        replay = context.config.replay  # no one decides in a replay
        if found is None or replay or not found.needs_approval(call.arguments):
            continue
        timeout_s = found.approval_timeout_s or context.config.approval_timeout_s
        approval = PendingApproval(
            call_id=request_id,
            tool_call_id=call.id,
            tool=call.name,
            requested_ms=run.now_ms,
            deadline_ms=run.now_ms + math.ceil(timeout_s * 1000),
        )
        approvals.append(approval)
        run.emit(
            ApprovalRequestedPayload(
                tool_calls=[call], call_id=request_id, deadline_ms=approval.deadline_ms
            ),
            upstream=request_id,
        )
        requests.append(_approval_request(run, call, approval))
    action = ToolAction(
        calls=list(calls),
        request_event_ids=request_ids,
        approvals=approvals,
        done=_answer_followups(run, calls, request_ids),
    )
    if len(action.done) == len(action.calls):
        return end_tool_turn(run, action)
    return goes_on(run.snapshot(action), run.events, approval_requests=requests)


def _answer_followups(
    run: RunDraft, calls: Sequence[ToolCall], request_ids: Sequence[str]
) -> dict[str, ChatMessage]:
    """Answer the turn's `schedule_followup` calls at once (no tool runs): the follow-up
    joins the run's state, or the model reads why it was refused."""
    results: dict[str, ChatMessage] = {}
    bounds = run.context.followups
    if bounds is None:
        return results
    for call, request_id in zip(calls, request_ids, strict=True):
        if call.name != FOLLOWUP_TOOL:
            continue
        kept: list[Followup] = run.data["followups"]
        made = schedule(
            bounds,
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
                FollowupScheduledPayload(
                    tool_calls=[call], followup_id=made.id, due_ms=made.due_ms
                ),
                upstream=request_id,
            )
            results[call.id] = ChatMessage.tool_result(call.id, call.name, confirmation(made))
        run.emit(ToolResponsePayload(tool_results=[results[call.id]]), upstream=request_id)
    return results


def _approval_request(run: RunDraft, call: ToolCall, approval: PendingApproval) -> ApprovalRequest:
    """The approval request of a call: what a person needs to decide on it."""
    said = [m.content for m in run.data["messages"] if m.role == "assistant" and m.content]
    return ApprovalRequest(
        call_id=approval.call_id,
        tool_call_id=call.id,
        run_id=run.data["run_id"],
        input_id=run.data["input_id"],
        key=run.data["key"],
        tool=call.name,
        arguments=call.arguments,
        text="\n".join(said),
        requested_ms=approval.requested_ms,
        deadline_ms=approval.deadline_ms,
    )
