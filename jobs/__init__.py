"""Streaming agent jobs from YAML: the spec (`jobs.spec`), the job graph (`jobs.graph`), the
`streamagents` command line (`jobs.cli`), cluster control (`jobs.cluster`), replay and its
report (`jobs.replay`), the run viewer (`jobs.viewer`) and the job's telemetry settings
(`jobs.telemetry`)."""
