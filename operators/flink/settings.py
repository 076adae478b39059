"""The Flink settings the agent engine needs, as plain data: `configure_environment` applies
them to a job, and a standalone cluster (`streamagents.jobs.cluster.standalone`) writes
`BUFFER_DEBLOAT` into its TaskManagers' configuration."""

from __future__ import annotations

__all__ = ["BACKLOG_SETTINGS", "BUFFER_DEBLOAT", "ENGINE_SETTINGS"]

ENGINE_SETTINGS = {
    "python.execution-mode": "thread",
    "python.fn-execution.bundle.size": "100000",
    "python.fn-execution.bundle.time": "5",
}
"""What the engine needs: thread mode (keyed state and timers in-process; process mode
loses timers at checkpoints), bundles far larger than the number of busy keys (PyFlink
stops its timer loop early at a multiple of the bundle size) and a short bundle time."""

BUFFER_DEBLOAT = "taskmanager.network.memory.buffer-debloat.enabled"
"""Flink's buffer debloating, a TaskManager setting: network buffers sized to about 1 s of
throughput. With an agent's slow records, fixed buffers hold minutes of input, which
unaligned checkpoints store and a restore must work off before its first checkpoint."""

BACKLOG_SETTINGS = {
    "execution.checkpointing.unaligned.enabled": "true",
    "execution.checkpointing.during-recovery.enabled": "true",
    "execution.checkpointing.unaligned.recover-output-on-downstream.enabled": "true",
    BUFFER_DEBLOAT: "true",
}
"""What keeps checkpoints at their interval while input waits: barriers overtake the
buffered input, checkpoints go on while a restore works it off, and the buffers hold about
a second of it (docs/agent-operator.md, "Checkpoints under backlog"). The two recovery
options work only with unaligned checkpoints: turn all three off together."""
