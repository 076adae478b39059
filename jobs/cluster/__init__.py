"""Cluster control: a standalone Flink cluster from the wheel's scripts, the local JVM a `run`
starts early, stopping a job with a savepoint, and what a rerun continues from."""
