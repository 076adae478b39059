"""Telemetry of agent runs, built from their events; nothing here imports PyFlink.

- `streamagents.operators.telemetry.spans`: OpenTelemetry GenAI spans from events, offline
  (`spans_from_events`) and while a job runs (`LiveSpans`), with ids derived from the events;
- `streamagents.operators.telemetry.live`: `LiveTelemetry`, the operator's live spans and
  GenAI metrics, sent by a thread of its own;
- `streamagents.operators.telemetry.sdk_spans`: the spans as OpenTelemetry SDK objects
  (needs the optional extra `streamagents[otel]`);
- `streamagents.operators.telemetry.log_runs`: an event log's events grouped into runs.
"""
