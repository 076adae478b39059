"""Scheduled follow-ups: the built-in `schedule_followup` tool and the follow-up record.

With `followups.enabled`, the model may call `schedule_followup(after_s, note)`; the run
answers the call itself (no tool runs): a `Followup` is kept in the run's state, and when
the run ends the engine keeps it in keyed state with a processing-time timer at its due
time. When the timer fires, the follow-up's input line (`followup_line`) starts a run for
the key like any input: `{"followup": {...}, "id": ..., "text": <note>, <key field>: key}`.
Only the engine makes follow-up lines: a line is one when it starts with `FOLLOWUP_PREFIX`,
which the parse step lets no input line start with (`not_a_followup`), so an input's own
`followup` field is a pass-through field like any other (a dead-lettered follow-up sent
again runs as a plain input, with its note as the text).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from streamagents.operators.agent.config import FollowupConfig
from streamagents.serde.chat import ToolSpec

__all__ = [
    "FOLLOWUP_PREFIX",
    "TOOL_NAME",
    "Followup",
    "followup_line",
    "is_followup_line",
    "schedule",
    "tool_spec",
]

TOOL_NAME = "schedule_followup"
"""The name the model calls the built-in tool by."""

FOLLOWUP_PREFIX = '{"followup":'
"""How every follow-up line the engine makes starts (see `followup_line`)."""


class Followup(BaseModel):
    """A follow-up the model scheduled: when it is due, what to do then, and who asked."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Unique per run and call: the call's tool_request event id.")
    key: str
    note: str = Field(description="The follow-up run's input text, as the model wrote it.")
    scheduled_ms: int
    due_ms: int
    run_id: str = Field(description="The run that scheduled it.")


def tool_spec(config: FollowupConfig) -> ToolSpec:
    """What the model is told about `schedule_followup`, with the bounds it must keep."""
    return ToolSpec(
        name=TOOL_NAME,
        description="Come back to this conversation later: after `after_s` seconds a new "
        "turn starts with `note` as its input, even if the user writes nothing. Use it to "
        "check on something again later. The current turn still ends now: answer as usual. "
        f"after_s must be between {config.min_delay_s:g} and {config.max_delay_s:g}; at most "
        f"{config.max_pending} follow-ups may wait at once.",
        parameters={
            "type": "object",
            "properties": {
                "after_s": {"type": "number", "description": "Delay in seconds."},
                "note": {
                    "type": "string",
                    "description": "What to do then, written for yourself (the new turn's input).",
                },
            },
            "required": ["after_s", "note"],
        },
    )


def schedule(
    config: FollowupConfig,
    arguments: dict[str, Any],
    *,
    followup_id: str,
    key: str,
    run_id: str,
    now_ms: int,
    waiting: int,
) -> Followup | str:
    """The follow-up a call asks for, or why it is refused (for the model to read).

    `waiting` counts the key's follow-ups already waiting, those of this run included."""
    after_s = arguments.get("after_s")
    note = arguments.get("note")
    if isinstance(after_s, bool) or not isinstance(after_s, int | float):
        return "after_s must be a number of seconds"
    if not math.isfinite(after_s) or not config.min_delay_s <= after_s <= config.max_delay_s:
        return (
            f"after_s={after_s:g} is outside the allowed delays: between "
            f"{config.min_delay_s:g} and {config.max_delay_s:g} seconds"
        )
    if not isinstance(note, str) or not note.strip():
        return "note must be a non-empty string"
    if len(note) > config.max_note_chars:
        return f"note is {len(note)} characters long; at most {config.max_note_chars} allowed"
    if waiting >= config.max_pending:
        return (
            f"{waiting} follow-ups already wait for this conversation, the most allowed "
            f"(max_pending={config.max_pending}); none was scheduled"
        )
    return Followup(
        id=followup_id,
        key=key,
        note=note,
        scheduled_ms=now_ms,
        due_ms=now_ms + math.ceil(after_s * 1000),
        run_id=run_id,
    )


def confirmation(followup: Followup) -> str:
    """The tool result the model reads for a scheduled follow-up: its id and due time."""
    due = datetime.fromtimestamp(followup.due_ms / 1000, UTC).isoformat(timespec="seconds")
    return json.dumps(
        {"scheduled": True, "followup_id": followup.id, "due_at": due, "due_ms": followup.due_ms}
    )


def followup_line(followup: Followup, key_field: str) -> str:
    """The input line of a follow-up's run: its note as text, its id, its key at the job's
    key field, and the follow-up's facts under `followup`."""
    line: dict[str, Any] = {
        "followup": followup.model_dump(exclude={"key", "note"}),
        "id": f"followup-{followup.id}",
        "text": followup.note,
    }
    *parents, last = key_field.split(".")
    target = line
    for name in parents:
        target = target.setdefault(name, {})
    target[last] = followup.key
    return json.dumps(line, ensure_ascii=False)


def is_followup_line(raw: str) -> bool:
    """Whether an input line is a follow-up's that the engine made (see `followup_line`)."""
    return raw.startswith(FOLLOWUP_PREFIX)
