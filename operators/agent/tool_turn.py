"""A turn's tool calls: their results coming in (run, rejected or expired), and the turn
ending when every call has one, with the next model call or an unknown-tool failure."""

from __future__ import annotations

from streamagents.operators.agent._run_draft import RunDraft
from streamagents.operators.agent.approvals import PendingApproval
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_endings import fail
from streamagents.operators.agent.run_state import (
    Continue,
    ModelAction,
    Outcome,
    PendingAction,
    Step,
    ToolAction,
    goes_on,
)
from streamagents.serde.event_payloads import ToolResponsePayload
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = ["apply_tool_outcome", "call_of", "outcome_fits", "record_results"]


def call_of(pending: ToolAction, call_id: str) -> ToolCall:
    """The call of the turn with tool call id `call_id`."""
    return next(c for c in pending.calls if c.id == call_id)


def outcome_fits(pending: PendingAction, outcome: Outcome) -> bool:
    """Whether a tools outcome is for calls that may run now and have no result yet."""
    if not isinstance(pending, ToolAction) or not outcome.call_ids:
        return True
    runnable = {call.id for call in pending.runnable_calls}
    return set(outcome.call_ids) <= runnable


def apply_tool_outcome(run: RunDraft, pending: ToolAction, outcome: Outcome) -> Step:
    """Take the results `perform` brought for the turn's runnable calls; a failure, or a
    result missing, ends the run with a dead letter."""
    call_ids = outcome.call_ids or [call.id for call in pending.calls]
    if outcome.error is not None or len(outcome.results) != len(call_ids):
        error = outcome.error or ErrorInfo(
            type="ToolRunError",
            message=f"{len(outcome.results)} results for {len(call_ids)} tool calls",
        )
        return fail(run, error, dead_letter=True)
    results = dict(zip(call_ids, outcome.results, strict=True))
    return record_results(
        run, pending, results, outcome.latency_ms, from_journal=frozenset(outcome.from_journal)
    )


def record_results(
    run: RunDraft,
    pending: ToolAction,
    results: dict[str, ChatMessage],
    latency_ms: float | None,
    approvals: list[PendingApproval] | None = None,
    settled: dict[str, str] | None = None,
    from_journal: frozenset[str] = frozenset(),
) -> Step:
    """Log results that came in; end the turn when every call has one, else wait on.

    `approvals` replaces the turn's approval entries when given; `settled` is what the
    step settled, for the engine to remember; `from_journal` the calls whose results the
    call journal answered (their events say so)."""
    done = {**pending.done, **results}
    for call, request_id in zip(pending.calls, pending.request_event_ids, strict=True):
        if call.id in results:
            run.emit(
                ToolResponsePayload(
                    tool_results=run.loggable([results[call.id]]),
                    latency_ms=latency_ms,
                    from_journal=True if call.id in from_journal else None,
                    **run.context.tools.origin(call.name),
                ),
                upstream=request_id,
            )
    action = pending.model_copy(
        update={
            "done": done,
            "approvals": pending.approvals if approvals is None else approvals,
        }
    )
    if len(done) < len(pending.calls):
        return goes_on(run.snapshot(action), run.events, settled=settled)
    step = end_tool_turn(run, action)
    return step.model_copy(update={"settled": settled or {}})


def end_tool_turn(run: RunDraft, pending: ToolAction) -> Step:
    """Every call of the turn has its result: add them in the model's order, go on."""
    data = run.data
    names = run.context.tool_names
    data["tool_calls"] += len(pending.calls)
    unknown = [call.name for call in pending.calls if call.name not in names]
    data["unknown_tool_calls"] += len(unknown)
    for call in pending.calls:
        data["messages"].append(pending.done[call.id])
    last = run.data["last_event_id"]
    budgets = run.context.config.budgets
    if data["unknown_tool_calls"] > budgets.max_unknown_tool_calls:
        quoted = ", ".join(repr(n) for n in unknown)
        error = ErrorInfo(
            type="UnknownTool",
            message=f"the model called unknown tool(s) {quoted}; "
            f"{data['unknown_tool_calls']} unknown calls exceed the "
            f"max_unknown_tool_calls={budgets.max_unknown_tool_calls}; "
            f"known tools: {', '.join(names) or 'none'}",
        )
        return fail(run, error, dead_letter=True)
    request_id = run.request_model(upstream=last)
    return Continue(state=run.snapshot(ModelAction(request_event_id=request_id)), events=run.events)
