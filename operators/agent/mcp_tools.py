"""The tools of an agent's MCP servers as `Tool`s: listed when the runtime is built, offered
with their input schemas under `mcp__<server>__<tool>`, called through `McpSessions`.

A call runs like any other async tool (`ToolRegistry.run`: the agent's tool timeout,
approvals, error results, events and spans); its result's media are stored by content hash
on the sessions' loop, never on the caller's. A tool outside the server's `allow` list is
never offered, and a call of it is refused as an unknown tool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from streamagents.connectors.mcp_content import result_parts
from streamagents.connectors.mcp_servers import McpServer, mcp_tool_name
from streamagents.connectors.mcp_session import McpSessions
from streamagents.connectors.media import MediaStore
from streamagents.operators.agent.tool_context import IDEMPOTENCY_META_KEY, ToolContext
from streamagents.operators.agent.tools import (
    DEFAULT_MAX_RESULT_BYTES,
    Tool,
    ToolRegistry,
    provider_schema,
)
from streamagents.serde.chat import ToolSpec

__all__ = ["McpTool", "add_mcp_tools", "offered_tool"]

_log = logging.getLogger(__name__)


class _AnyArguments(BaseModel):
    """Placeholder arguments model: an MCP tool's server validates its own arguments."""


@dataclass(frozen=True)
class _RemoteCall:
    """Calls one MCP tool on its server and turns the result into parts (async)."""

    sessions: McpSessions = field(repr=False)
    server: str
    tool: str
    timeout_s: float
    store: MediaStore = field(repr=False)
    max_result_bytes: int

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> list[Any]:
        """The tool's result as parts; an error result raises (see `McpToolError`). The
        request's `_meta` carries the call's idempotency key (`IDEMPOTENCY_META_KEY`)."""
        store, limit = self.store, self.max_result_bytes
        future = self.sessions.call(
            self.server,
            self.tool,
            arguments,
            self.timeout_s,
            lambda result: result_parts(result, store, limit),
            meta={IDEMPOTENCY_META_KEY: context.idempotency_key},
        )
        return await asyncio.wrap_future(future)


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool of an MCP server: its arguments go to the server as the model gave them."""

    server: str = ""
    """The server's name (also in the tool's name)."""
    remote_name: str = ""
    """The tool's name on its server."""

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The model's arguments, for the server to validate."""
        return {"arguments": dict(arguments)}

    def origin(self) -> dict[str, str]:
        """The server that answers a call, and the tool's name there."""
        return {"mcp_server": self.server, "mcp_tool": self.remote_name}


def offered_tool(
    spec: McpServer,
    listed: Any,
    sessions: McpSessions,
    store: MediaStore,
    timeout_s: float,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> McpTool:
    """The `McpTool` of one listed tool; raises ValueError for a name or schema refused,
    or one over the server's caps (`max_schema_bytes`, `max_description_chars`): what a
    tool server declares goes out with every request, so it is bounded."""
    name = mcp_tool_name(spec.name, listed.name)
    description = listed.description or listed.title or ""
    if len(description) > spec.max_description_chars:
        raise ValueError(
            f"its description of {len(description)} characters is over "
            f"max_description_chars={spec.max_description_chars}"
        )
    schema = listed.input_schema or {"type": "object"}
    parameters = provider_schema(schema, max_bytes=spec.max_schema_bytes)
    ToolSpec(name=name, description=description, parameters=parameters)  # validates the name
    call_timeout = min(spec.call_timeout_s or timeout_s, timeout_s)
    return McpTool(
        name=name,
        description=description,
        parameters=parameters,
        func=_RemoteCall(sessions, spec.name, listed.name, call_timeout, store, max_result_bytes),
        arguments_model=_AnyArguments,
        argument_names=("arguments",),
        context_parameter="context",
        requires_approval=spec.needs_approval(listed.name),
        approval_timeout_s=spec.approval_timeout_s,
        server=spec.name,
        remote_name=listed.name,
    )


def add_mcp_tools(
    registry: ToolRegistry, servers: Sequence[McpServer], store: MediaStore
) -> McpSessions:
    """Start the servers' sessions, list their tools, add the allowed ones to `registry`
    (which closes the sessions when it is closed), and return the sessions."""
    sessions = McpSessions(servers)
    registry.close_with(sessions.close)
    listed = sessions.listed_tools()
    for spec in servers:
        for remote in listed[spec.name]:
            if not spec.allows(remote.name):
                continue
            try:
                tool = offered_tool(
                    spec, remote, sessions, store, registry.timeout_s, registry.max_result_bytes
                )
            except ValueError as exc:
                _log.warning("MCP server %r: tool %r not offered: %s", spec.name, remote.name, exc)
                continue
            if tool.name in registry:
                _log.warning(
                    "MCP server %r: tool %r not offered: another tool is named %r",
                    spec.name,
                    remote.name,
                    tool.name,
                )
                continue
            registry.add(tool)
    return sessions
