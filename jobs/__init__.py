"""YAML job specs, the job graph builder and the `streamagents` command line."""
