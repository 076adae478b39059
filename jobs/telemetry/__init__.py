"""Telemetry a job sends: the spec's `telemetry` block completed by the `OTEL_*` variables,
and spans exported as OTLP."""
