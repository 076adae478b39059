"""Event JSON records as keyed Avro single-object messages, for the event log on a topic.

A message over the topic's `max_record_bytes` (a `verbose` event of a long answer) is not
written as it is: the event's JSON goes whole to the media store, and the message is the
event encoded at the `standard` level (each text a bounded prefix with its full length),
with the ref's JSON under `payload.attributes.offloaded_event`; should even that be too
large, its messages, tool calls and tool results are left out too.
"""

from __future__ import annotations

import json
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import MapFunction, RuntimeContext

from streamagents.connectors.record_offload import JSON_MIME, RecordOffload
from streamagents.operators.flink.bounded_records import OffloadWorker
from streamagents.operators.flink.eventlog_sink import invalid_record_event
from streamagents.serde import avro_single_object
from streamagents.serde.avro import LATEST_VERSION, LogLevel, to_record
from streamagents.serde.events import AgentEvent

__all__ = ["MESSAGE_TYPE", "OFFLOADED_EVENT", "EventMessages"]

MESSAGE_TYPE = Types.ROW_NAMED(
    ["key", "value"], [Types.STRING(), Types.PRIMITIVE_ARRAY(Types.BYTE())]
)
"""Rows of (record key: the event's agent key, record value: the single-object message)."""

OFFLOADED_EVENT = "offloaded_event"
"""The payload attribute of a bounded message: the JSON of the whole event's media ref."""


class EventMessages(MapFunction):
    """Map function: an `AgentEvent` JSON string to a `MESSAGE_TYPE` row, encoded with the
    newest schema at `level`, within `max_bytes`; an invalid record becomes an `error`
    event, as in files."""

    def __init__(self, level: str, media_root: str, max_bytes: int) -> None:
        self.level = LogLevel.parse(level)
        self._offload = OffloadWorker(media_root, max_bytes)

    def open(self, runtime_context: RuntimeContext) -> None:
        """Nothing to start: the store and its thread come with the first large event."""

    def close(self) -> None:
        """Stop the offload thread, if a large event started one."""
        self._offload.close()

    def map(self, value: str) -> Row:
        """The event's message row (bounded when the whole event is over the limit)."""
        try:
            event = AgentEvent.model_validate_json(value)
        except ValueError as error:
            value = invalid_record_event(value, error)
            event = AgentEvent.model_validate_json(value)
        message = _encode(to_record(event, version=LATEST_VERSION, level=self.level))
        if len(message) > self._offload.max_bytes:
            ref = self._offload.run(_keep_event, value)
            message = _bounded_message(event, ref, self._offload.max_bytes)
        return Row(event.key, message)


def _encode(record: dict[str, Any]) -> bytes:
    return avro_single_object.encode(record, LATEST_VERSION)


def _keep_event(offload: RecordOffload, value: str) -> dict[str, Any]:
    return offload.keep_bytes(value.encode("utf-8", "surrogatepass"), JSON_MIME)


def _bounded_message(event: AgentEvent, ref: dict[str, Any], max_bytes: int) -> bytes:
    """The message of an event stored whole under `ref`: standard texts, and the ref."""
    record = to_record(event, version=LATEST_VERSION, level=LogLevel.STANDARD)
    payload = record["payload"]
    payload["attributes"] = {**payload["attributes"], OFFLOADED_EVENT: json.dumps(ref)}
    message = _encode(record)
    if len(message) <= max_bytes:
        return message
    payload.update(messages=[], tool_calls=[], tool_results=[])
    return _encode(record)
