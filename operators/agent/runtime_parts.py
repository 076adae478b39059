"""What `AgentRuntime.from_config` builds from an `AgentConfig`: the model, the tools (its
MCP servers' included), the media store and the call journal the config names."""

from __future__ import annotations

from typing import NamedTuple

from streamagents.connectors.call_journal import CallJournal, FileCallJournal
from streamagents.connectors.mcp_servers import McpServer, require_mcp
from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import ChatModel, PrefixCache, create_model
from streamagents.connectors.providers.failover import FailoverLink, FailoverModel
from streamagents.operators.agent.config import AgentConfig, ModelTarget, ToolRef
from streamagents.operators.agent.tools import Tool, ToolRegistry, load_tool
from streamagents.serde.message_json import MessageJson

__all__ = ["RuntimeParts", "runtime_parts"]


class RuntimeParts(NamedTuple):
    """The parts an `AgentRuntime` runs with, besides its config."""

    model: ChatModel
    tools: ToolRegistry
    store: MediaStore
    message_json: MessageJson
    journal: CallJournal | None


def runtime_parts(config: AgentConfig, model: ChatModel | None = None) -> RuntimeParts:
    """Build the model (unless one is given), tools, media store and call journal (beside
    the store, when `journal.enabled`) a config names."""
    store = MediaStore(config.media_store)
    message_json = MessageJson()
    if model is None:
        model = _model(config, store, message_json)
    tools = ToolRegistry(
        [_declared_tool(entry) for entry in config.tools],
        timeout_s=config.tool_timeout_s,
        max_workers=config.max_in_flight,  # every run in flight may be in a sync tool
        max_result_bytes=config.max_tool_result_bytes,
    )
    servers = started_servers(config)
    if servers:
        require_mcp()
        from streamagents.operators.agent.mcp_tools import add_mcp_tools  # needs the mcp extra

        add_mcp_tools(tools, servers, store)
    journal = FileCallJournal(config.media_store, config.job_id) if config.journal.enabled else None
    return RuntimeParts(model, tools, store, message_json, journal)


def started_servers(config: AgentConfig) -> list[McpServer]:
    """The MCP servers the agent starts: all of them, but in a replay only those declared
    `replay: live` (a replay touches no other tool server)."""
    return [s for s in config.mcp_servers if not config.replay or s.replay == "live"]


def _model(config: AgentConfig, store: MediaStore, message_json: MessageJson) -> ChatModel:
    """The config's model; with fallbacks, the failover chain over it and them."""
    cache = config.context_cache
    prefix_cache = (
        PrefixCache(ttl_s=cache.ttl_s, min_tokens=cache.min_tokens, owner=config.job_id)
        if cache.enabled
        else None
    )

    def build(target: ModelTarget) -> ChatModel:
        options = dict(target.options)
        gemini = target.provider == "gemini"
        if gemini and config.builtin_tools.enabled():
            options["builtin_tools"] = config.builtin_tools.enabled()
        return create_model(
            target.provider,
            target.model,
            sdk_process=target.sdk_process,
            message_json=message_json,
            prefix_cache=prefix_cache if gemini else None,
            media_store=store,
            limits=target.limits.share(config.subtasks),
            upload_media=target.upload_media,
            **options,
        )

    spec = config.model
    if not spec.fallbacks:
        return build(spec)
    failover = spec.failover
    return FailoverModel(
        [FailoverLink(t.provider, t.model, build(t), t.generation) for t in spec.chain()],
        conditions=failover.conditions,
        breaker=failover.breaker,
    )


def _declared_tool(entry: str | ToolRef) -> Tool:
    """The tool an entry of `AgentConfig.tools` names, with the approval rule it sets."""
    if isinstance(entry, str):
        return load_tool(entry)
    rule = None if entry.approval is None else entry.approval == "required"
    return Tool.from_function(
        load_tool(entry.ref),
        requires_approval=rule,
        approval_timeout_s=entry.approval_timeout_s,
        allow_edits=entry.allow_edits,
        by_tool_name=entry.by_tool_name,
    )
