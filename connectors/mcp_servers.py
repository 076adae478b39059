"""The MCP servers an agent takes tools from, as plain data: transport, allow-list, timeouts,
approvals; and the names their tools get (`mcp__<server>__<tool>`).

Environment values of a stdio server and header values of an HTTP server are secrets
(`SecretStr`): no repr, log line, error or event shows them.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from streamagents.connectors.durations import WaitSeconds

__all__ = [
    "MCP_TOOL_PREFIX",
    "ApprovalRule",
    "CallApprovalTimeout",
    "McpHttp",
    "McpMissingError",
    "McpServer",
    "McpStdio",
    "mcp_tool_name",
    "require_mcp",
    "split_mcp_tool_name",
]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid")
MCP_TOOL_PREFIX = "mcp__"
"""How the name of every MCP tool begins: `mcp__<server>__<tool>`."""
ApprovalRule = Literal["required", "none"]
"""Whether a tool's calls wait for a person's decision: required (every call) or none."""

CallApprovalTimeout = Annotated[
    WaitSeconds | None,
    Field(description="How long a call waits for its decision; unset: the agent's."),
]
"""The wait for a decision on one tool's calls (`approval_timeout_s` of an MCP server or a
tool), overriding the agent's."""
_TOOL_NAME = re.compile(r"^mcp__([a-z][a-z0-9-]*)__(.+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpMissingError(ImportError):
    """The `mcp` SDK, which MCP servers need, is not installed."""


def require_mcp() -> None:
    """Raise `McpMissingError` naming the extra to install unless the `mcp` SDK imports."""
    try:
        import mcp  # noqa: F401
    except ImportError as error:
        raise McpMissingError(
            f"MCP servers need the official mcp SDK ({error.name} is missing): "
            "pip install 'streamagents[mcp]'"
        ) from None


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model knows a server's tool by: `mcp__<server>__<tool>`, any character a
    provider refuses in a tool name (outside A-Z, a-z, 0-9, `_`, `-`) written as `_`."""
    return f"{MCP_TOOL_PREFIX}{server}__{_UNSAFE.sub('_', tool)}"


def split_mcp_tool_name(name: str) -> tuple[str, str] | None:
    """The (server, tool) an MCP tool's name holds, or None for a name of another tool."""
    match = _TOOL_NAME.match(name)
    return None if match is None else (match.group(1), match.group(2))


class McpStdio(BaseModel):
    """A server the operator starts as a subprocess and talks to over its stdin/stdout."""

    model_config = _MODEL_CONFIG

    type: Literal["stdio"] = Field(description="stdio: a subprocess.")
    command: str = Field(min_length=1, description="The program to start, e.g. `npx`, `uvx`.")
    args: list[str] = Field(default_factory=list, description="Its command-line arguments.")
    env: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Environment variables added to the SDK's default environment (secrets).",
    )
    cwd: str | None = Field(default=None, description="Its working directory; unset: ours.")


class McpHttp(BaseModel):
    """A server reached over MCP's streamable HTTP transport."""

    model_config = _MODEL_CONFIG

    type: Literal["http"] = Field(description="http: streamable HTTP.")
    url: str = Field(pattern=r"^https?://\S+$", description="The endpoint, e.g. .../mcp.")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="HTTP headers sent with every request (secrets)."
    )


class McpServer(BaseModel):
    """One MCP server: how to reach it, which of its tools the agent is offered, how long
    connecting and each call may take, how it is restarted, and which calls need approval."""

    model_config = _MODEL_CONFIG

    name: str = Field(
        pattern=r"^[a-z][a-z0-9-]{0,19}$",
        description="Unique among the agent's servers: lowercase letters, digits, `-`, at most "
        "20; its tools are named `mcp__<name>__<tool>`.",
    )
    transport: Annotated[McpStdio | McpHttp, Field(discriminator="type")] = Field(
        description="`type: stdio` (command, args, env, cwd) or `type: http` (url, headers)."
    )
    allow: list[str] = Field(
        min_length=1,
        description='The server\'s tools the agent is offered, by their MCP names; ["*"]: all.',
    )
    connect_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Connecting, the initialize handshake and listing the tools, together.",
    )
    call_timeout_s: WaitSeconds | None = Field(
        default=None,
        description="One call's timeout; unset: the agent's tool_timeout_s (which bounds it).",
    )
    restart_backoff_s: float = Field(
        default=1.0, gt=0, le=600, description="Wait before the first restart; doubles each try."
    )
    max_restart_backoff_s: float = Field(
        default=60.0, gt=0, le=3600, description="Longest wait between restarts."
    )
    approval: ApprovalRule = Field(
        default="none", description="required: every call of its tools waits for a decision."
    )
    tool_approval: dict[str, ApprovalRule] = Field(
        default_factory=dict, description="Per tool (MCP name), overriding `approval`."
    )
    approval_timeout_s: CallApprovalTimeout = None
    replay: Literal["recorded", "live"] = Field(
        default="recorded",
        description="In a replay: recorded: the server is not started and its tools are not "
        "offered; live: it is started, and a call the recording lacks runs (read-only "
        "servers only; refused when a tool of it needs approval).",
    )

    max_schema_bytes: int = Field(
        default=65536,
        ge=256,
        description="Most bytes of a tool's input schema with its `$ref`s inlined (as it goes "
        "out with every request); a tool over it is not offered, with a warning.",
    )
    max_reply_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Most bytes of one reply (a stdio line, an HTTP response to a request); "
        "past it the reply is cut off, the call fails and the session restarts. An event of "
        "an HTTP server's own event stream is bounded the same (cut off, the stream reopened).",
    )
    max_description_chars: int = Field(
        default=4096,
        ge=0,
        description="Most characters of a tool's description (it goes out with every "
        "request); a tool over it is not offered, with a warning.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> McpServer:
        if "*" in self.allow and len(self.allow) > 1:
            raise ValueError('allow: "*" allows every tool; list names or "*" alone')
        if self.allow != ["*"]:
            unknown = sorted(set(self.tool_approval) - set(self.allow))
            if unknown:
                raise ValueError(f"tool_approval names tools not in allow: {', '.join(unknown)}")
        if self.max_restart_backoff_s < self.restart_backoff_s:
            raise ValueError("max_restart_backoff_s is smaller than restart_backoff_s")
        if self.replay == "live" and (
            self.approval == "required" or "required" in self.tool_approval.values()
        ):
            raise ValueError("replay: live is refused for a server whose tools need approval")
        return self

    def allows(self, tool: str) -> bool:
        """Whether the agent is offered the server's tool called `tool`."""
        return self.allow == ["*"] or tool in self.allow

    def needs_approval(self, tool: str) -> bool:
        """Whether every call of the server's tool `tool` waits for a person's decision."""
        return self.tool_approval.get(tool, self.approval) == "required"

    def secrets(self) -> list[str]:
        """The values no message may show: its env and header values, and a header's
        credential alone (the token of `Bearer <token>`)."""
        transport = self.transport
        values = transport.env if isinstance(transport, McpStdio) else transport.headers
        plain = [value.get_secret_value() for value in values.values()]
        return plain + [value.split()[-1] for value in plain if len(value.split()) > 1]
