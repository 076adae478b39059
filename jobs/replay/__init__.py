"""Replay: the recorded runs of an event log as replay input lines, the event-log topic as
their source, and the report comparing a replay with its recording (`replay.report`)."""
