"""A run that replays a recorded one: its run id namespace, its recorded tool calls, and how
its tool calls are answered (from the recording, else by the tool's replay policy).

A replay job (`streamagents replay`) feeds the engine the recorded input lines with two
reserved fields, which `parse_input` takes out of the pass-through attributes:
`_replay_of`, the recorded run's id, and `_replay_tools`, the tool calls that run made
with their results. An agent with `AgentConfig.replay` set runs each line as a replay: its
run id is in the replay namespace (never one of production's) and every event it logs
carries `replay_of`. Each tool call is answered from the recording when the recorded run
called the same tool with the same arguments (parsed JSON, compared as values); otherwise
the tool's `replay` policy decides: `recorded` (an error result saying so) or `live` (run
it), and a tool that needs approval or has side effects never runs live. No call parks for
a decision in a replay: a call that needs approval gets the recorded run's outcome (its
result when it was approved, the rejection or time-out it got otherwise), else an error
result. Only MCP servers declared `replay: live` are started, and their tools are `live`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = [
    "REPLAY_OF_FIELD",
    "REPLAY_TOOLS_FIELD",
    "RecordedToolCall",
    "ReplayPolicy",
    "answer_from_recording",
    "not_recorded",
    "recorded_match",
    "replay_run_id",
]

REPLAY_OF_FIELD = "_replay_of"
"""The input field naming the recorded run a replay line replays."""
REPLAY_TOOLS_FIELD = "_replay_tools"
"""The input field holding the recorded run's tool calls and their results."""

ReplayPolicy = Literal["recorded", "live"]
"""What a replayed call the recording cannot answer gets: an error result, or a live run."""


def replay_run_id(job_id: str, input_id: str) -> str:
    """The run id of a replay of an input: `replay-` and a hash that also covers the
    namespace, so it can never equal a production run id (`run-...`)."""
    digest = hashlib.sha256(f"replay\n{job_id}\n{input_id}".encode()).hexdigest()[:32]
    return "replay-" + digest


class RecordedToolCall(BaseModel):
    """One tool call of a recorded run: the tool, its arguments and the result it got."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="The tool's name.")
    arguments: dict[str, Any] = Field(description="Its arguments, as parsed JSON.")
    result: ChatMessage = Field(description="The tool-result message (media as store refs).")


def recorded_match(call: ToolCall, recorded: Sequence[RecordedToolCall]) -> ChatMessage | None:
    """The recorded result of the same tool with equal arguments, as the result of `call`
    (its id); None when the recording has no such call."""
    for entry in recorded:
        if entry.name == call.name and entry.arguments == call.arguments:
            return entry.result.model_copy(update={"tool_call_id": call.id})
    return None


def not_recorded(call: ToolCall, replay_of: str) -> str:
    """Why a replayed call got no result: the recording does not have it."""
    return (
        f"tool {call.name!r} was not called with these arguments in the recorded run "
        f"{replay_of}, and its replay policy is 'recorded', so it was not run"
    )


async def answer_from_recording(
    calls: Sequence[ToolCall],
    recorded: Sequence[RecordedToolCall],
    policies: Mapping[str, ReplayPolicy],
    replay_of: str,
    run_live: Callable[[Sequence[ToolCall]], Awaitable[list[ChatMessage]]],
    error_result: Callable[[ToolCall, str], ChatMessage],
) -> list[ChatMessage]:
    """The results of a replayed turn's calls, in order: recorded ones, live ones for the
    tools whose policy is `live` (run together by `run_live`), error results for the rest."""
    results: list[ChatMessage | None] = [recorded_match(call, recorded) for call in calls]
    live = [
        index
        for index, call in enumerate(calls)
        if results[index] is None and policies.get(call.name) == "live"
    ]
    if live:
        ran = await run_live([calls[index] for index in live])
        for index, message in zip(live, ran, strict=True):
            results[index] = message
    return [
        message if message is not None else error_result(call, not_recorded(call, replay_of))
        for call, message in zip(calls, results, strict=True)
    ]
