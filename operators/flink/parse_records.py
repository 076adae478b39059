"""The parse step before `key_by`: input lines become (key, line) or dead letters.

A decision on a parked tool call (a line with `approval`) goes on as (key, its canonical
decision line), which the agent function tells from inputs by its start, but only from a
channel that takes decisions (`Takes`): the job's approvals source, or the main input when
the agent config allows it (`decisions.from_input`) and there is no approvals source. Any
other decision-shaped line is an `UntrustedDecision` dead letter, a run input on the
approvals source a `NotADecision` one, and with `decisions.secret` a decision without its
valid signature a `BadSignature` one. No input line goes on looking like the engine's own
follow-up lines (see `not_a_followup`).

An input's media may point only where its source allows (`InputMedia`: by default no
media-store ref, only https URLs); this is checked here, before the step's own offload
turns large inline media into refs. A line that cannot become a run goes to the
dead-letter side output with the reason and
the raw line (a Kafka record value that is not UTF-8: the line decoded with replacement
characters, and its exact bytes in the media store, under `offloaded.input`); a good one
goes on as `(key, line)`, its inline media above the offload threshold already in the
media store and the line holding their refs, so a queued input never keeps media bytes in
keyed state.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyflink.common import Types
from pyflink.datastream import ProcessFunction, RuntimeContext

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.approvals import Takes, decision_line, parse_line
from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.agent.emitted_records import dead_letter_record
from streamagents.operators.agent.records import (
    ErrorInfo,
    InputError,
    InputRecord,
    check_media_sources,
    not_a_followup,
    offload_input,
)
from streamagents.operators.flink._task_watch import TaskWatch
from streamagents.operators.flink.side_outputs import DEAD_LETTERS_TAG
from streamagents.serde.messages import MediaRef
from streamagents.serde.safe_text import clip

__all__ = ["KEYED_INPUT_TYPE", "ParseRecords"]

KEYED_INPUT_TYPE = Types.TUPLE([Types.STRING(), Types.STRING()])
"""What `ParseRecords` emits: (key, input line with large inline media as refs)."""


class ParseRecords(ProcessFunction):
    """Parses input lines: good ones go on as (key, input line), bad ones to dead letters.

    Inline media above the offload threshold go to the media store here, before the line
    can wait in a key's queue, so keyed state never holds their bytes: the line goes on
    with those parts as refs and its id written in (see `offload_input`). `takes` says
    what this channel's lines may be: run inputs, decisions, or both.
    """

    def __init__(self, config: AgentConfig, takes: Takes) -> None:
        self._takes: Takes = takes
        self._secret = config.decisions.secret
        self._key_field = config.key_field
        self._limits = config.input_limits
        self._media_sources = config.input_media
        self._media_root = config.media_store
        self._threshold = config.offload_threshold_bytes
        self._redact = config.redactor()

    def open(self, runtime_context: RuntimeContext) -> None:
        """Start the thread the media store is used on (see `AgentFunction._off_task`)."""
        self._store: MediaStore | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="streamagents-parse")
        self._watch = TaskWatch(self.close)  # PyFlink calls no close() on cancel or failure

    def close(self) -> None:
        """Stop the media store's thread (at the end of input, or when the task ended)."""
        self._watch.stop()
        self._worker.shutdown(wait=False)

    def _offload(self, record: InputRecord) -> str:
        """The record's line with large inline media stored (on the worker thread only)."""
        if self._store is None:
            self._store = MediaStore(self._media_root)
        return offload_input(record, self._store, self._threshold)

    def _keep_bytes(self, data: bytes) -> MediaRef:
        """Store an input's exact bytes (on the worker thread only)."""
        if self._store is None:
            self._store = MediaStore(self._media_root)
        return self._store.put(data, "application/octet-stream")

    def _not_utf8(self, value: bytes, error: UnicodeDecodeError) -> str:
        """The dead letter of input bytes that are not UTF-8: the line decoded with
        replacement characters, and the ref of its exact bytes."""
        reason = ErrorInfo(
            type="InvalidText",
            message=f"input is not valid UTF-8 text ({error.reason} at offset {error.start})",
        )
        received = value.decode("utf-8", "replace")
        try:
            exact = self._worker.submit(self._keep_bytes, value).result()
        except Exception as store_error:
            reason = ErrorInfo(
                type="MediaStoreError",
                message=clip(
                    f"{reason.message}; its bytes could not be stored: "
                    f"{type(store_error).__name__}: {store_error}"
                ),
            )
            exact = None
        return dead_letter_record(
            "parse", reason, received, received_bytes=exact, redact=self._redact
        )

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterator[Any]:
        """Validate one line (text, or UTF-8 bytes from Kafka), offload its large inline media
        and route it."""
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as error:
                yield DEAD_LETTERS_TAG, self._not_utf8(value, error)
                return
        try:
            if not isinstance(value, str):
                raise InputError(
                    f"input must be a JSON text line, not {type(value).__name__}", "InvalidJson"
                )
            secret = None if self._secret is None else self._secret.get_secret_value()
            record = parse_line(value, self._key_field, self._limits, self._takes, secret)
            if not isinstance(record, tuple):  # where its media point is checked here, once
                check_media_sources(record, self._media_sources)
        except Exception as error:
            received = value if isinstance(value, str) else repr(type(value))
            yield (
                DEAD_LETTERS_TAG,
                dead_letter_record(
                    "parse", ErrorInfo.from_exception(error), received, redact=self._redact
                ),
            )
            return
        if isinstance(record, tuple):  # a decision on a parked tool call
            key, decision = record
            yield key, decision_line(decision, key)
            return
        if not record.message.has_media:
            yield record.key, not_a_followup(value, record)
            return
        try:
            line = self._worker.submit(self._offload, record).result()
        except Exception as error:
            yield (
                DEAD_LETTERS_TAG,
                dead_letter_record(
                    "parse",
                    ErrorInfo(
                        type="MediaStoreError", message=clip(f"{type(error).__name__}: {error}")
                    ),
                    value,
                    key=record.key,
                    record_id=record.id if record.id_given else None,
                    redact=self._redact,
                ),
            )
            return
        yield record.key, not_a_followup(line, record)
