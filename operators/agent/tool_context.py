"""What a tool may ask to know about its call: `ToolContext`, given to a parameter
annotated with it (as pydantic-ai's `RunContext` is), never shown to the model.

Its `idempotency_key` is the same every time the engine performs the same call of the same
run again (after a restore, a source replay of its input, or a rerun of the job) and
differs in a replay job, whose run ids differ: a tool with a side effect outside the job
(a payment, a ticket, an e-mail) passes it to the system it calls, which does the work
once per key. An MCP tool's call carries it in the request's `_meta`, under
`IDEMPOTENCY_META_KEY`.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["IDEMPOTENCY_META_KEY", "ToolContext", "idempotency_key"]

IDEMPOTENCY_META_KEY = "streamagents/idempotency_key"
"""The `_meta` field of an MCP `tools/call` request that carries the call's key."""


def idempotency_key(call_id: str) -> str:
    """The idempotency key of the call with journal id `call_id` (`durable_calls.call_id`):
    32 hex digits, so it names the call without exposing the job's or the input's ids."""
    return hashlib.sha256(call_id.encode()).hexdigest()[:32]


class ToolContext(BaseModel):
    """The facts of one tool call a tool may ask for by annotating a parameter with this type."""

    model_config = ConfigDict(frozen=True)

    idempotency_key: str = Field(
        description="Stable across restores, source replays and reruns; new in a replay run."
    )
    run_id: str = Field(description="The run the call belongs to.")
    input_id: str = Field(description="The id of the input the run answers.")
    key: str = Field(description="The key the run belongs to.")
    tenant: str | None = Field(
        default=None, description="The run's tenant, when a per-tenant budget names one."
    )
    attempt: int = Field(
        default=0, ge=0, description="The subtask's attempt: 0 at first, more after restarts."
    )
