"""Checks a loaded spec must pass before it runs (`check_runnable`): its tools import, its
models' providers are installed and take their options, approvals and follow-ups have
inputs that stay open, MCP and OpenTelemetry extras are installed, Kafka parts have a
connector jar and transactions that outlive a checkpoint.
"""

from __future__ import annotations

import sys
from pathlib import Path

from streamagents.connectors.connector_jars import JarFetchError, cached_jar
from streamagents.connectors.mcp_servers import McpMissingError, McpServer, require_mcp
from streamagents.connectors.providers import adapter_class
from streamagents.jobs.spec.errors import SpecError, SpecProblem, dotted, redacted, yaml_path
from streamagents.jobs.spec.loading import LoadedSpec
from streamagents.jobs.spec.schema import URI_SCHEME, JobSpec, KafkaSinkSpec, KafkaSourceSpec
from streamagents.jobs.spec.yaml_source import FieldPath
from streamagents.operators.agent.call_cost import unpriced_models
from streamagents.operators.agent.config import SPEND_BUDGETS, live_replay_problem
from streamagents.operators.agent.tools import load_tool
from streamagents.operators.telemetry.sdk_spans import OtelMissingError, require_otel

__all__ = ["check_runnable", "kafka_parts"]


def check_runnable(loaded: LoadedSpec, *, replay: bool = False) -> None:
    """Import every tool the spec names and check the chosen model's provider is installed
    (its options were checked on loading); raises `SpecError` naming each problem. For a
    `replay` job, whose runs never park (the recording decides), tools that need approval
    need no open input."""
    spec_dir = str(loaded.base_dir)
    if spec_dir not in sys.path:
        sys.path.append(spec_dir)
    problems = []
    approving = False
    provider = loaded.model.wire
    try:
        adapter_class(provider)
    except (ValueError, ImportError) as exc:
        index = loaded.spec.agent.model.index(loaded.model)
        path = ("agent", "model", index, "provider")
        problems.append(
            SpecProblem(
                loaded.source.source_map.line_of(yaml_path(path, loaded.source.data)),
                dotted(yaml_path(path, loaded.source.data)),
                f"provider {provider!r} is not available in this installation ({exc})",
            )
        )
    problems += _fallback_problems(loaded)
    for index, target in enumerate(loaded.spec.agent.tools):
        try:
            found = load_tool(target.ref)
        except Exception as exc:
            line = loaded.source.source_map.line_of(("agent", "tools", index))
            problems.append(SpecProblem(line, f"agent.tools[{index}]", str(exc)))
            continue
        declared = (
            found.requires_approval if target.approval is None else target.approval == "required"
        )
        approving = approving or bool(declared)
        problem = live_replay_problem(target.replay, bool(declared), target.side_effects)
        if problem is not None:
            line = loaded.source.source_map.line_of(("agent", "tools", index))
            problems.append(SpecProblem(line, f"agent.tools[{index}]", problem))
        if declared and loaded.spec.sinks.approval_requests is None:
            line = loaded.source.source_map.line_of(("agent", "tools", index))
            problems.append(
                SpecProblem(
                    line,
                    f"agent.tools[{index}]",
                    f"tool {found.name!r} declares that its calls need approval, but "
                    "sinks.approval_requests is not set",
                )
            )
    problems += _mcp_approval_problems(loaded)
    problems += _unpriced_budget_problems(loaded)
    approving = approving or any(_approving(server) for server in loaded.spec.agent.mcp_servers)
    problems += _parked_key_problems(loaded, approving)
    problems += _read_once_problems(loaded, approving and not replay)
    problems += _kafka_problems(loaded)
    if loaded.spec.agent.mcp_servers:
        try:
            require_mcp()
        except McpMissingError as exc:
            line = loaded.source.source_map.line_of(("agent", "mcp_servers"))
            problems.append(SpecProblem(line, "agent.mcp_servers", str(exc)))
    if loaded.telemetry is not None:
        try:
            require_otel()
        except OtelMissingError as exc:
            line = loaded.source.source_map.line_of(("telemetry",))
            given = "set" if loaded.spec.telemetry is not None else "set by OTEL_* variables"
            problems.append(SpecProblem(line, "telemetry", f"{given}, but {exc}"))
    if problems:
        raise SpecError(str(loaded.path), redacted(problems, loaded.source))


def _approving(server: McpServer) -> bool:
    """Whether some call of the server's tools may wait for a person's decision."""
    return server.approval == "required" or "required" in server.tool_approval.values()


def _mcp_approval_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """MCP servers whose tools need approval in a spec that has nowhere to ask for it."""
    if loaded.spec.sinks.approval_requests is not None:
        return []
    return [
        SpecProblem(
            loaded.source.source_map.line_of(("agent", "mcp_servers", index)),
            f"agent.mcp_servers[{index}]",
            f"MCP server {server.name!r} has tools whose calls need approval, but "
            "sinks.approval_requests is not set",
        )
        for index, server in enumerate(loaded.spec.agent.mcp_servers)
        if _approving(server)
    ]


def _unpriced_budget_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """Cost budgets over a chosen model (or fallback) that has no price: its calls would
    count nothing against them, so the budget would not hold."""
    unpriced = unpriced_models(loaded.model)
    if not unpriced:
        return []
    budgets = loaded.spec.agent.budgets
    problems = []
    for name in SPEND_BUDGETS:
        budget = getattr(budgets, name)
        if budget is None or budget.cost is None:
            continue
        path = ("agent", "budgets", name, "cost")
        problems.append(
            SpecProblem(
                loaded.source.source_map.line_of(path),
                dotted(path),
                f"a cost budget needs prices, but model {unpriced[0]!r} has none in the "
                "published table and the spec sets none: its calls would count nothing "
                "against it; set its prices (agent.model.prices) or budget tokens instead",
            )
        )
    return problems


def _fallback_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """The chosen model's fallbacks whose provider is not installed, named before the job
    starts."""
    problems = []
    index = loaded.spec.agent.model.index(loaded.model)
    for number, fallback in enumerate(loaded.model.fallbacks):
        where = ("agent", "model", index, "fallbacks", number)
        try:
            adapter_class(fallback.provider)
        except (ValueError, ImportError) as exc:
            path = yaml_path((*where, "provider"), loaded.source.data)
            problems.append(
                SpecProblem(
                    loaded.source.source_map.line_of(path),
                    dotted(path),
                    f"provider {fallback.provider!r} is not available in this installation ({exc})",
                )
            )
    return problems


def _parked_key_problems(loaded: LoadedSpec, approving: bool) -> list[SpecProblem]:
    """Settings for keys with a parked run, set on an agent none of whose tools parks a run."""
    agent = loaded.spec.agent
    if approving:
        return []
    problems = []
    for name in ("while_parked", "max_inputs_per_parked_key"):
        if name in agent.model_fields_set:
            problems.append(
                SpecProblem(
                    loaded.source.source_map.line_of(("agent", name)),
                    f"agent.{name}",
                    f"{name} applies to runs parked for an approval, but no tool of this "
                    "agent needs approval; remove it or mark a tool `approval: required`",
                )
            )
    return problems


def _read_once_problems(loaded: LoadedSpec, approving: bool) -> list[SpecProblem]:
    """A job whose runs wait for people or for time (approvals, follow-ups) needs inputs that
    stay open: a source read once ends the job when its inputs are answered, and decisions
    read once never see what a person writes later."""
    spec, line_of = loaded.spec, loaded.source.source_map.line_of
    waits = []
    if approving:
        waits.append("runs wait for approvals (a tool needs approval)")
    elif spec.approvals is not None:
        waits.append("runs wait for approvals (approvals is set)")
    if spec.agent.followups.enabled:
        waits.append("follow-ups wait for their due time (agent.followups.enabled)")
    problems = []
    files = spec.source.files
    if waits and files is not None and files.watch_interval_s is None:
        problems.append(
            SpecProblem(
                line_of(("source", "files")),
                "source.files",
                f"{' and '.join(waits)}, but the input is read once: the job would end once "
                "its inputs are answered, leaving them as ApprovalPending / FollowupPending "
                "dead letters; set source.files.watch_interval_s (e.g. 1) so the job runs "
                "until you stop it (`run` again continues it), or read from Kafka",
            )
        )
    decisions = spec.approvals.files if spec.approvals is not None else None
    if decisions is not None and decisions.watch_interval_s is None:
        problems.append(
            SpecProblem(
                line_of(("approvals", "files")),
                "approvals.files",
                "decisions are read once, when the job starts, so a decision written later "
                "never arrives; set approvals.files.watch_interval_s (e.g. 1)",
            )
        )
    return problems


def kafka_parts(spec: JobSpec) -> dict[FieldPath, KafkaSourceSpec | KafkaSinkSpec]:
    """The spec's Kafka source and sinks (event log included) by their path in the YAML."""
    parts: dict[FieldPath, KafkaSourceSpec | KafkaSinkSpec] = {}
    if spec.source.kafka is not None:
        parts["source", "kafka"] = spec.source.kafka
    if spec.approvals is not None and spec.approvals.kafka is not None:
        parts["approvals", "kafka"] = spec.approvals.kafka
    for name in ("outputs", "dead_letters", "approval_requests"):
        sink = getattr(spec.sinks, name)
        if sink is not None and sink.kafka is not None:
            parts["sinks", name, "kafka"] = sink.kafka
    if spec.event_log is not None and spec.event_log.kafka is not None:
        parts["event_log", "kafka"] = spec.event_log.kafka
    return parts


def _kafka_problems(loaded: LoadedSpec) -> list[SpecProblem]:
    """The job's Kafka parts need a connector jar (one a part names, which serves them all,
    or the fetched one), a named jar must exist, and an exactly-once sink's transactions
    must outlive a checkpoint interval."""
    problems = []
    line_of = loaded.source.source_map.line_of
    interval_s = loaded.spec.checkpointing.interval_s
    parts = kafka_parts(loaded.spec)
    any_named = any(part.connector_jar is not None for part in parts.values())
    for path, part in parts.items():
        if part.connector_jar is None and not any_named:
            try:
                missing = cached_jar("kafka") is None
                reason = (
                    "no Kafka connector jar in the cache; run `streamagents jars fetch kafka` "
                    "(or set connector_jar)"
                )
            except JarFetchError as exc:
                missing, reason = True, f"no Kafka connector jar: {exc}; set connector_jar"
            if missing:
                problems.append(SpecProblem(line_of(path), dotted(path), reason))
        elif (
            part.connector_jar is not None
            and not URI_SCHEME.match(part.connector_jar)
            and not Path(part.connector_jar).is_file()
        ):
            where = (*path, "connector_jar")
            problems.append(
                SpecProblem(
                    line_of(where),
                    dotted(where),
                    f"no such file: {part.connector_jar}; run `streamagents jars fetch kafka` "
                    "and leave connector_jar unset to use the cached jar",
                )
            )
        if (
            isinstance(part, KafkaSinkSpec)
            and part.delivery == "exactly-once"
            and part.transaction_timeout_s <= interval_s
        ):
            where = (*path, "transaction_timeout_s")
            problems.append(
                SpecProblem(
                    line_of(where),
                    dotted(where),
                    f"the transaction timeout ({part.transaction_timeout_s:g} s) must be longer "
                    f"than checkpointing.interval_s ({interval_s:g} s): transactions are "
                    "committed on checkpoints, and Kafka aborts one that outlives its timeout",
                )
            )
    return problems
