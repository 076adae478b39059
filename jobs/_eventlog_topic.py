"""Event JSON records as keyed Avro single-object messages, for the event log on a topic."""

from __future__ import annotations

from pyflink.common import Row, Types

from streamagents.operators.flink.eventlog_sink import invalid_record_event
from streamagents.serde import avro_single_object
from streamagents.serde.avro import LATEST_VERSION, LogLevel, to_record
from streamagents.serde.events import AgentEvent

__all__ = ["MESSAGE_TYPE", "EventMessages"]

MESSAGE_TYPE = Types.ROW_NAMED(
    ["key", "value"], [Types.STRING(), Types.PRIMITIVE_ARRAY(Types.BYTE())]
)
"""Rows of (record key: the event's agent key, record value: the single-object message)."""


class EventMessages:
    """Map function: an `AgentEvent` JSON string to a `MESSAGE_TYPE` row, encoded with the
    newest schema at `level`; an invalid record becomes an `error` event, as in files."""

    def __init__(self, level: str) -> None:
        self.level = LogLevel.parse(level)

    def __call__(self, raw: str) -> Row:
        try:
            event = AgentEvent.model_validate_json(raw)
        except ValueError as error:
            event = AgentEvent.model_validate_json(invalid_record_event(raw, error))
        record = to_record(event, version=LATEST_VERSION, level=self.level)
        return Row(event.key, avro_single_object.encode(record, LATEST_VERSION))
