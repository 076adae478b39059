"""Calls answered from the call journal: a completed call is never made twice.

`perform` asks `DurableCalls` before it makes a run's model call or tool calls. Each call
has an id derived from the run's state alone (`call_id`: the job, the run id, the pending
action's request event id, the call's index in the action), so it is the same after a
restore, a source replay or a rerun of the job, and different in a replay job (whose run
ids differ). A call whose id the journal holds, for a request with the same hash, is
answered from its entry: no request, no tool execution. A call it does not hold is made
and its result recorded as soon as it completes, with its media already in the media
store (only refs are recorded).

The look-ups and records run on the engine's loop thread, never the task thread (where
pyarrow calls deadlock): a file journal's first look-up reads the job's segments there
once, later ones are dictionary look-ups, and a record appends and flushes one line.

The journal never fails a run: an entry that does not read back as a result is a warning
and the call is made again; an entry that cannot be written is a warning, the result is
used all the same, and the call counts in `unrecorded` (the `call_journal_write_failures`
metric): after a restore it may be made again, as without a journal.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from streamagents.connectors.call_journal import CallJournal, JournalEntry, answer, request_hash
from streamagents.serde.chat import ChatResponse
from streamagents.serde.messages import ChatMessage, ToolCall

__all__ = [
    "DurableCalls",
    "ModelAnswer",
    "ToolAnswers",
    "call_id",
    "model_request_hash",
    "tool_request_hash",
]

log = logging.getLogger(__name__)


def call_id(job_id: str, run_id: str, action_id: str, index: int) -> str:
    """The journal id of a run's call: the `index`th call of its action `action_id`."""
    return f"{job_id}/{run_id}/{action_id}/{index}"


def model_request_hash(
    fingerprint: str, request: Sequence[ChatMessage], generation: Mapping[str, Any]
) -> str:
    """The hash of a model call's request: the agent's fingerprint (prompt, models, tools),
    the messages sent and the generation settings."""
    settings = json.dumps(generation, sort_keys=True, default=str)
    return request_hash(fingerprint, settings, *(m.model_dump_json() for m in request))


def tool_request_hash(call: ToolCall) -> str:
    """The hash of a tool call's request: its tool and its arguments."""
    return request_hash(call.name, json.dumps(call.arguments, sort_keys=True, default=str))


class ModelAnswer(NamedTuple):
    """A model call's response, and whether the journal answered it."""

    response: ChatResponse
    from_journal: bool
    recorded: bool


class ToolAnswers(NamedTuple):
    """A tool turn's results in the calls' order, the ids of the calls the journal
    answered, and how many results the journal could not keep."""

    results: list[ChatMessage]
    from_journal: list[str]
    unrecorded: int


class DurableCalls:
    """Looks a run's calls up in a `CallJournal` and records them when they complete."""

    def __init__(
        self,
        journal: CallJournal,
        job_id: str,
        clock_ms: Callable[[], float],
        roll_s: float = 60.0,
        keep_s: float = 3600.0,
    ) -> None:
        self.journal = journal
        self._job_id = job_id
        self._clock_ms = clock_ms
        self._roll_ms = roll_s * 1000
        self._keep_ms = keep_s * 1000
        self._rolled_ms = clock_ms()

    async def model_call(
        self,
        run_id: str,
        action_id: str,
        hashed: str,
        call: Callable[[], Awaitable[ChatResponse]],
    ) -> ModelAnswer:
        """The response of the run's pending model call: from the journal when it holds
        one for this request (`hashed`), else from `call`, then recorded."""
        identity = call_id(self._job_id, run_id, action_id, 0)
        entry = self._answer(identity, hashed)
        if entry is not None:
            try:
                return ModelAnswer(ChatResponse.model_validate_json(entry.result), True, True)
            except ValidationError:
                log.warning("call journal: entry %s is not a model response; calling", identity)
        response = await call()
        recorded = self._record(identity, hashed, "model", response.model_dump_json())
        return ModelAnswer(response, False, recorded)

    async def tool_calls(
        self,
        run_id: str,
        action_id: str,
        indexed: Sequence[tuple[int, ToolCall]],
        run: Callable[[Sequence[ToolCall]], Awaitable[list[ChatMessage]]],
    ) -> ToolAnswers:
        """The results of a turn's tool calls (each with its index in the turn): those the
        journal holds from it, the others from `run` (which offloads their media), each
        recorded."""
        answered: dict[str, ChatMessage] = {}
        to_run: list[tuple[str, str, ToolCall]] = []
        for index, call in indexed:
            identity = call_id(self._job_id, run_id, action_id, index)
            hashed = tool_request_hash(call)
            entry = self._answer(identity, hashed)
            message = _tool_result(entry, call) if entry is not None else None
            if message is None:
                to_run.append((identity, hashed, call))
            else:
                answered[call.id] = message
        ran = await run([call for _, _, call in to_run]) if to_run else []
        unrecorded = 0
        for (identity, hashed, call), result in zip(to_run, ran, strict=True):
            answered[call.id] = result
            if not self._record(identity, hashed, "tool", result.model_dump_json()):
                unrecorded += 1
        ran_ids = {call.id for _, _, call in to_run}
        from_journal = [call.id for _, call in indexed if call.id not in ran_ids]
        return ToolAnswers([answered[c.id] for _, c in indexed], from_journal, unrecorded)

    def _answer(self, identity: str, hashed: str) -> JournalEntry | None:
        """The entry that answers the call, if the journal can be read and holds one."""
        try:
            return answer(self.journal, identity, hashed)
        except Exception as error:  # a journal that cannot be read: the call is made
            log.warning("call journal: look-up of %s failed (%s); calling", identity, error)
            return None

    def _record(
        self, identity: str, hashed: str, kind: Literal["model", "tool"], result: str
    ) -> bool:
        """Record a completed call; returns whether the journal kept it."""
        entry = JournalEntry(
            call_id=identity,
            request_hash=hashed,
            kind=kind,
            result=result,
            recorded_ms=int(self._clock_ms()),
        )
        try:
            self.journal.record(entry)
        except Exception as error:
            log.warning("call journal: %s could not be recorded (%s)", identity, error)
            return False
        self._upkeep(entry.recorded_ms)
        return True

    def _upkeep(self, now_ms: int) -> None:
        """Every `roll_s`, start a new segment and drop those older than `keep_s`.

        PyFlink gives a Python function no checkpoint callback, so segments roll by time,
        and a rolled segment is kept for `keep_s` (which must exceed two checkpoint
        intervals plus a restart: a restore may reach back that far)."""
        if now_ms - self._rolled_ms < self._roll_ms:
            return
        self._rolled_ms = now_ms
        try:
            self.journal.roll()
            self.journal.prune(int(now_ms - self._keep_ms))
        except Exception as error:
            log.warning("call journal: rolling or pruning failed (%s)", error)


def _tool_result(entry: JournalEntry, call: ToolCall) -> ChatMessage | None:
    """The recorded result of `call`, if the entry reads as one (else a warning)."""
    try:
        message = ChatMessage.model_validate_json(entry.result)
    except ValidationError:
        message = None
    if message is None or message.role != "tool" or message.tool_call_id != call.id:
        log.warning("call journal: entry %s is not this call's result; running", entry.call_id)
        return None
    return message
