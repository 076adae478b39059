"""How a run ends: its answer (output record, trimmed memory) or its failure (error output,
maybe a dead letter), and the errors of the budgets that end runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from streamagents.operators.agent._run_draft import RunDraft
from streamagents.operators.agent.call_cost import run_cost_usd
from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.agent.emitted_records import OutputRecord
from streamagents.operators.agent.memory import trim_history
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.agent.run_state import Finish
from streamagents.serde.chat import TokenUsage
from streamagents.serde.event_payloads import (
    BudgetExceededPayload,
    ErrorPayload,
    MemoryTrimmedPayload,
    OutputPayload,
)
from streamagents.serde.messages import ChatMessage

__all__ = ["budget_error", "fail", "finish", "timeout_error"]


def budget_error(budget: str, limit: float, detail: str) -> ErrorInfo:
    """The error of a run that hit `budget` (its `limit`), saying how (`detail`)."""
    return ErrorInfo(
        type="BudgetExceeded",
        message=f"budget {budget}={limit:g} exceeded: {detail}",
        budget=budget,
        limit=limit,
    )


def timeout_error(config: AgentConfig) -> ErrorInfo:
    """The error of a run that took its whole `run_timeout_s`."""
    limit = config.budgets.run_timeout_s
    return budget_error("run_timeout_s", limit, f"the run took {limit:g} s or longer")


def _output_record(
    run: RunDraft,
    status: Literal["ok", "error"],
    message: ChatMessage | None,
    error: ErrorInfo | None,
) -> OutputRecord:
    """The run's output record: its answer (parts only when it has media) or its error."""
    data = run.data
    return OutputRecord(
        id=data["input_id"],
        key=data["key"],
        run_id=data["run_id"],
        status=status,
        text=message.content if message is not None else "",
        parts=message.parts if message is not None and message.has_media else [],
        error=error,
        usage=TokenUsage(
            input_tokens=data["input_tokens"],
            output_tokens=data["output_tokens"],
            cached_tokens=data["cached_tokens"],
        ),
        model_calls=data["model_calls"],
        tool_calls=data["tool_calls"],
        latency_ms=max(0, run.now_ms - data["started_ms"]),
        attributes=data["attributes"],
        answered_by=data["answered_by"],
        cost_usd=run_cost_usd(data["call_costs_usd"]),
        call_costs_usd=data["call_costs_usd"],
    )


def finish(run: RunDraft, message: ChatMessage, history: Sequence[ChatMessage]) -> Finish:
    """End the run with the model's answer: its output, and the key's history with the
    run's messages added, trimmed to the memory bounds."""
    output = _output_record(run, "ok", message, None)
    run.emit(
        OutputPayload(
            messages=run.loggable([message]),
            usage=output.usage,
            latency_ms=output.latency_ms,
            input_id=run.data["input_id"],
            status="ok",
            cost_usd=output.cost_usd,
        )
    )
    context = run.context
    memory = context.config.memory
    trimmed = trim_history(
        [*history, *run.data["messages"]],
        memory.max_messages,
        memory.max_bytes,
        context.message_json.size,
    )
    if trimmed.trimmed:
        run.emit(
            MemoryTrimmedPayload(
                dropped_messages=trimmed.dropped_messages,
                dropped_bytes=trimmed.dropped_bytes,
                kept_messages=len(trimmed.messages),
                kept_bytes=trimmed.kept_bytes,
            )
        )
    return Finish(
        events=run.events,
        output=output,
        history=trimmed.messages,
        followups=run.data["followups"],
        cancelled=run.cancelled,
    )


def fail(run: RunDraft, error: ErrorInfo, dead_letter: bool = False) -> Finish:
    """End the run with `error`: an error output, and a dead letter when `dead_letter`."""
    input_id = run.data["input_id"]
    run.emit(
        ErrorPayload(error_class=error.type, error_message=error.message, input_id=input_id)
        if error.budget is None
        else BudgetExceededPayload(
            error_class=error.type,
            error_message=error.message,
            input_id=input_id,
            budget=error.budget,
            limit=error.limit,
        )
    )
    output = _output_record(run, "error", None, error)
    run.emit(
        OutputPayload(
            usage=output.usage,
            latency_ms=output.latency_ms,
            input_id=input_id,
            status="error",
            cost_usd=output.cost_usd,
        )
    )
    letter = run.context.dead_letter(run.state, error) if dead_letter else None
    return Finish(
        events=run.events,
        output=output,
        dead_letter=letter,
        followups=run.data["followups"],
        cancelled=run.cancelled,
    )
