"""The declared agent: model, prompt, tools, memory bounds and budgets, as plain data.

Every model here is pydantic, JSON-serialisable and picklable, so a config travels from the
YAML spec to the Flink workers unchanged and is validated before any Flink object exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from streamagents.connectors.durations import LONGEST_WAIT_S, WaitSeconds
from streamagents.connectors.mcp_servers import (
    ApprovalRule,
    CallApprovalTimeout,
    McpHttp,
    McpServer,
)
from streamagents.connectors.providers import PROVIDER_NAMES, PrefixCacheSettings, RateLimits
from streamagents.connectors.providers.circuit_breaker import BreakerSettings
from streamagents.connectors.providers.file_uploads import UploadMedia
from streamagents.connectors.providers.options import (
    checked,
    client_options,
    generation_options,
)
from streamagents.connectors.providers.prices import ModelPrices
from streamagents.operators.agent.tools import DEFAULT_MAX_RESULT_BYTES
from streamagents.serde.avro import LogLevel
from streamagents.serde.safe_text import Redactor, url_secrets

__all__ = [
    "GEMINI_EXTRAS_PROVIDERS",
    "LONGEST_WAIT_S",
    "SPEND_BUDGETS",
    "AgentConfig",
    "AgentSettings",
    "Budgets",
    "BuiltinTools",
    "ContextCacheConfig",
    "DecisionsConfig",
    "FailoverCondition",
    "FailoverConfig",
    "FallbackModel",
    "FollowupConfig",
    "InputLimits",
    "InputMedia",
    "JournalConfig",
    "MemoryConfig",
    "ModelSpec",
    "ModelTarget",
    "SpendBudget",
    "TelemetryConfig",
    "TenantSpendBudget",
    "ToolRef",
    "fallback_extras_problem",
    "followup_key_problem",
    "gemini_extras_problem",
    "live_replay_problem",
    "redact_options",
    "tenant_of",
]

_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid")
_SECRET_OPTION = re.compile(
    r"(?:^|[_.-])(?:api_?key|keys?|secrets?|tokens?|access_token|password|passwd|pwd|"
    r"credentials?|auth|authorization|cookie)(?:$|[_.-])",
    re.IGNORECASE,
)
_SECRET_VALUES = frozenset({"default_headers", "headers", "default_query", "http_options"})
_HIDDEN = "[hidden]"


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of client options fit for a repr: secret-looking values replaced by `[hidden]`.

    Hidden are the values of options named like a key, token, secret, password or
    credential (`api_key`, `access_token`, ...), and every value of header-like maps
    (`default_headers`, where `Authorization` travels). Other options, and the names of
    all, stay visible. Nested maps are redacted the same way."""
    shown: dict[str, Any] = {}
    for name, value in options.items():
        if _SECRET_OPTION.search(str(name)) and value is not None:
            shown[name] = _HIDDEN
        elif str(name) in _SECRET_VALUES and isinstance(value, Mapping):
            shown[name] = dict.fromkeys(value, _HIDDEN)
        elif isinstance(value, Mapping):
            shown[name] = redact_options(value)
        else:
            shown[name] = value
    return shown


UPLOAD_PROVIDERS = ("gemini", "openai", "openai-responses")
"""The providers whose wire refers to media uploaded to a file API (`upload_media`)."""


_SET_ELSEWHERE = {
    "limits": "the model's `limits`",
    "upload_media": "the model's `upload_media`",
    "generation": "the model's `generation`",
    "builtin_tools": "the agent's `builtin_tools`",
    "context_cache": "the agent's `context_cache`",
}
"""What a model's adapter is given from settings of their own, never from its options."""


def _wire(provider: Any) -> str | None:
    """The provider whose options a model entry takes (the demo speaks the Gemini wire);
    None for a name that is no provider (refused on its own)."""
    wire = "gemini" if provider == "demo" else provider
    return wire if wire in PROVIDER_NAMES else None


class ModelTarget(BaseModel):
    """One chat model and how to call it: provider, model name, client options, generation."""

    model_config = _MODEL_CONFIG

    provider: str = Field(description=f"Provider name: {', '.join(PROVIDER_NAMES)}.")
    model: str = Field(min_length=1, description="Model name as the provider spells it.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Client options (api_key, base_url, timeout, max_retries...), checked "
        "against the provider's (`connectors.providers.options.client_options`).",
    )
    generation: dict[str, Any] = Field(
        default_factory=dict,
        description="Generation options sent with every request (temperature, ...), checked "
        "against the provider's wire (`connectors.providers.options.generation_options`).",
    )
    sdk_process: bool | None = Field(
        default=False,
        description="Run the SDK's requests in a worker process of their own (its own "
        "interpreter and GIL), not in the TaskManager's Python (see `SdkProcessModel`); "
        "None: where the TaskManager may use two cores or more (a spec's default).",
    )
    prices: ModelPrices | None = Field(
        default=None,
        description="US dollars per million tokens (input, cached input, output) of this "
        "model; unset: the published price table's, if it lists the model.",
    )
    limits: RateLimits = Field(
        default_factory=RateLimits,
        description="Rate limits of this model's calls for the whole job, shared out over its "
        "subtasks; with none set, calls still slow down on 429s (`adaptive`).",
    )

    upload_media: UploadMedia | None = Field(
        default=None,
        description="Send media of `min_bytes` or more to the provider's file API once and "
        f"refer to the file ({', '.join(UPLOAD_PROVIDERS)}; not Vertex AI); unset: inline.",
    )

    @property
    def name(self) -> str:
        """`provider/model`, how a failover chain names the model (replies, metrics)."""
        return f"{self.provider}/{self.model}"

    @field_validator("options")
    @classmethod
    def _options_the_provider_takes(
        cls, options: dict[str, Any], info: ValidationInfo
    ) -> dict[str, Any]:
        for name, home in _SET_ELSEWHERE.items():
            if name in options:
                raise ValueError(f"{name} goes in {home}, not in the model's options")
        wire = _wire(info.data.get("provider"))
        if wire is not None:
            checked(client_options(wire), options, "option")
        return options

    @field_validator("generation")
    @classmethod
    def _generation_the_wire_takes(
        cls, generation: dict[str, Any], info: ValidationInfo
    ) -> dict[str, Any]:
        wire = _wire(info.data.get("provider"))
        if wire is not None:
            checked(generation_options(wire), generation, "generation option")
        return generation

    @model_validator(mode="after")
    def _uploads_have_a_file_api(self) -> ModelTarget:
        if self.upload_media is None:
            return self
        if self.provider not in UPLOAD_PROVIDERS:
            raise ValueError(
                f"upload_media: the {self.provider} wire refers to no uploaded files; it "
                f"applies to {', '.join(UPLOAD_PROVIDERS)}"
            )
        if self.options.get("vertexai"):
            raise ValueError("upload_media: Vertex AI has no Files API; refer to gs:// URLs")
        return self

    def secret_values(self) -> list[str]:
        """The credentials this model's options hold (see `ModelOptions.secret_values`);
        none for a provider whose options are not typed (a test model)."""
        wire = _wire(self.provider)
        return (
            []
            if wire is None
            else client_options(wire).model_validate(self.options).secret_values()
        )

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Options hold API keys and auth headers: repr/str hide their values (see
        # `redact_options`); `options` itself keeps them for the client.
        for name, value in super().__repr_args__():
            yield name, (redact_options(value) if name == "options" else value)


class FallbackModel(ModelTarget):
    """A model a call moves on to when the models before it in the chain fail."""

    provider: Literal[PROVIDER_NAMES] = Field(  # type: ignore[valid-type]
        description=f"Provider name: {', '.join(PROVIDER_NAMES)}."
    )


FailoverCondition = Literal["rate_limited", "server_error", "timeout", "connection"]
"""A failure that moves a call on to the next model (see `FailoverConfig.conditions`)."""


class FailoverConfig(BaseModel):
    """When a call moves on to the next model of the chain, and the breakers' settings."""

    model_config = _MODEL_CONFIG

    conditions: list[FailoverCondition] = Field(
        default_factory=lambda: ["rate_limited", "server_error", "timeout", "connection"],
        min_length=1,
        description="Failures (after the model's own retries) that move a call on: "
        "rate_limited, server_error, timeout, connection.",
    )
    breaker: BreakerSettings = Field(
        default_factory=BreakerSettings, description="Each model's circuit breaker."
    )


class ModelSpec(ModelTarget):
    """Which chat model to call and how, and the fallbacks a failing call moves on to."""

    fallbacks: list[FallbackModel] = Field(
        default_factory=list,
        description="Models tried in order when this one fails with a failover condition "
        "(any provider; each with its own options and generation).",
    )
    failover: FailoverConfig = Field(
        default_factory=FailoverConfig,
        description="When a call moves on to a fallback, and the circuit breakers.",
    )

    def chain(self) -> list[ModelTarget]:
        """This model and its fallbacks, in the order a call tries them."""
        return [self, *self.fallbacks]

    @model_validator(mode="after")
    def _chain_is_sound(self) -> ModelSpec:
        if not self.fallbacks and self.failover != FailoverConfig():
            raise ValueError("failover: its settings apply only with fallbacks; add fallbacks")
        seen = {self.name: "the model itself"}
        for index, fallback in enumerate(self.fallbacks):
            if fallback.name in seen:
                raise ValueError(
                    f"fallbacks[{index}]: {fallback.name} is already in the chain "
                    f"({seen[fallback.name]}); each model may appear once"
                )
            seen[fallback.name] = f"fallbacks[{index}]"
        return self


class MemoryConfig(BaseModel):
    """Bounds of a key's short-term memory (the conversation kept across runs)."""

    model_config = _MODEL_CONFIG

    max_messages: int = Field(default=40, ge=0, description="Most messages kept; 0 keeps none.")
    max_bytes: int = Field(
        default=262144, ge=0, description="Most bytes kept (JSON size of the messages)."
    )
    ttl_seconds: float | None = Field(
        default=None, gt=0, description="Forget the history after this long without a run."
    )


class SpendBudget(BaseModel):
    """Tokens and dollars a key (or the job) may spend over a rolling window, and what a run
    meets when
    the window is spent: a model call starts only while the window's spend is under every
    limit set (the call that crosses a limit completes)."""

    model_config = _MODEL_CONFIG

    tokens: int | None = Field(
        default=None, ge=1, description="Input plus output tokens per window; unset: no limit."
    )
    cost: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="US dollars per window (calls of models without a known price count "
        "nothing here); unset: no limit.",
    )
    window_s: float = Field(
        gt=0, le=LONGEST_WAIT_S, allow_inf_nan=False, description="The rolling window."
    )
    on_exceeded: Literal["dead_letter", "defer"] = Field(
        default="dead_letter",
        description="dead_letter: the run ends (error output and a BudgetExceeded dead letter "
        "naming the budget, its window and the spend); defer: the run waits, holding no call "
        "slot, until the window has room.",
    )

    @model_validator(mode="after")
    def _a_limit(self) -> SpendBudget:
        if self.tokens is None and self.cost is None:
            raise ValueError("a spend budget needs tokens, cost or both")
        return self


class TenantSpendBudget(SpendBudget):
    """A `SpendBudget` per tenant, the tenant named by a field of the input; each of the
    operator's parallel subtasks allows a tenant `1/parallelism` of it (see
    docs/quotas-failover-and-spend.md)."""

    field: str = Field(
        min_length=1, description="Dotted path of the input field naming the tenant."
    )


class Budgets(BaseModel):
    """Limits of one run, and spend limits over rolling windows; hitting a run limit ends
    the run with a BudgetExceeded error output."""

    model_config = _MODEL_CONFIG

    max_model_calls: int = Field(default=8, ge=1, description="Model calls per run.")
    max_tool_calls: int = Field(default=16, ge=0, description="Tool calls per run.")
    max_tokens: int | None = Field(
        default=None, ge=1, description="Input plus output tokens per run, summed over calls."
    )
    run_timeout_s: float = Field(default=300.0, gt=0, description="Wall time of one run.")
    max_unknown_tool_calls: int = Field(
        default=1,
        ge=0,
        description="Calls to tools that do not exist that a run tolerates (each one is "
        "answered with an error result so the model can correct itself); one more ends the "
        "run with an UnknownTool error and a dead letter.",
    )
    per_key: SpendBudget | None = Field(
        default=None, description="What each key may spend over a rolling window."
    )
    per_tenant: TenantSpendBudget | None = Field(
        default=None, description="What each tenant may spend over a rolling window."
    )
    per_job: SpendBudget | None = Field(
        default=None,
        description="What the whole job may spend over a rolling window, all keys and tenants "
        "together; each parallel subtask allows 1/parallelism of it.",
    )


SPEND_BUDGETS = ("per_key", "per_tenant", "per_job")
"""The spend budgets of `Budgets`, by field name."""


def tenant_of(budgets: Budgets, key_field: str, key: str, attributes: dict[str, Any]) -> str | None:
    """The tenant a run's input names in the field `budgets.per_tenant.field` (its key when
    that is the key field `key_field`); None when the input has no such field or it is not
    text."""
    budget = budgets.per_tenant
    if budget is None:
        return None
    if budget.field == key_field:
        return key
    value: Any = attributes
    for part in budget.field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


class InputLimits(BaseModel):
    """Bounds of one input line; a line over one becomes a parse dead letter naming it."""

    model_config = _MODEL_CONFIG

    max_line_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="Most UTF-8 bytes of an input line as given, inline base64 media included "
        "(they go to the media store only after this check).",
    )
    max_key_chars: int = Field(default=1024, ge=1, description="Most characters of the key.")
    max_attributes_bytes: int = Field(
        default=65536,
        ge=0,
        description="Most bytes of the pass-through fields together (their JSON size); they "
        "are copied into every output.",
    )
    max_depth: int = Field(
        default=64,
        ge=1,
        le=256,
        description="Most nesting levels of objects and lists in a line (the line itself is "
        "level 1); at most 256, so every later step stays far within Python's recursion limit.",
    )


class InputMedia(BaseModel):
    """Where an input line's media may come from. Inputs are untrusted: by default a line
    may carry inline bytes and `https` URLs, but no ref into the media store (the store is
    shared by every input of the job, so a ref by digest would let one customer read
    another's media) and no URL the provider would read with the job's own credentials
    (`gs://` on Vertex AI, say) or that points inside the network."""

    model_config = _MODEL_CONFIG

    store_refs: bool = Field(
        default=False,
        description="Accept `ref` parts (objects of the media store named by digest): only for "
        "a source whose every writer may read every object in the store.",
    )
    url_schemes: tuple[str, ...] = Field(
        default=("https",),
        description="The URL schemes a `url` part may use (lowercase), e.g. https, gs.",
    )
    url_hosts: tuple[str, ...] = Field(
        default=(),
        description="The hosts a `url` part may name: `example.com`, or `*.example.com` for "
        "its subdomains; empty: any host.",
    )

    def refusal(self, source: str, url: str | None) -> str | None:
        """Why a part with this source (`data`, `url` or `ref`) may not be used, or None."""
        if source == "ref":
            if self.store_refs:
                return None
            return (
                "media store refs are not accepted from this source (inputs are untrusted; "
                "declare the source's media store_refs: true only if it is trusted)"
            )
        if source != "url" or url is None:
            return None
        try:
            parts = urlsplit(url)
        except ValueError:  # a malformed host (an unclosed IPv6 bracket)
            return "url cannot be read"
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        if scheme not in self.url_schemes:
            allowed = ", ".join(self.url_schemes) or "none"
            return f"url scheme {scheme!r} is not allowed (allowed schemes: {allowed})"
        if self.url_hosts and not any(_host_matches(host, rule) for rule in self.url_hosts):
            return f"url host {host!r} is not among the allowed hosts"
        return None


def _host_matches(host: str, rule: str) -> bool:
    """Whether `host` is the host `rule` names, or (`*.domain`) one of its subdomains."""
    rule = rule.lower()
    if rule.startswith("*."):
        return host.endswith(rule[1:]) and len(host) > len(rule) - 1
    return host == rule


class BuiltinTools(BaseModel):
    """Gemini's built-in server-side tools, run on Google's side next to the agent's own
    tools; all off unless asked for. Recommended baseline: search and URL context on, code
    execution off (it is an action surface: opt in deliberately)."""

    model_config = _MODEL_CONFIG

    google_search: bool = Field(default=False, description="Grounding with Google Search.")
    url_context: bool = Field(default=False, description="Read URLs named in the prompt.")
    code_execution: bool = Field(default=False, description="Run Python the model writes.")

    def enabled(self) -> tuple[str, ...]:
        """The names of the tools switched on, in a fixed order."""
        return tuple(name for name in type(self).model_fields if getattr(self, name))


class ContextCacheConfig(PrefixCacheSettings):
    """Explicit context caching (Gemini): the system prompt, tool declarations and agent
    documents are cached on the server once and referenced by every request."""

    enabled: bool = Field(default=False, description="Cache the request prefix.")


GEMINI_EXTRAS_PROVIDERS = ("gemini", "demo")
"""Providers whose wire carries built-in tools and context caching (demo is the Gemini wire)."""


def gemini_extras_problem(
    provider: str, builtin_tools: BuiltinTools, context_cache: ContextCacheConfig
) -> str | None:
    """Why a provider cannot serve the agent's built-in tools or context cache, or None."""
    if provider in GEMINI_EXTRAS_PROVIDERS:
        return None
    if builtin_tools.enabled():
        return (
            f"builtin_tools: built-in server tools ({', '.join(builtin_tools.enabled())}) exist "
            f"only on the gemini wire; model provider {provider!r} has none"
        )
    if context_cache.enabled:
        return (
            f"context_cache: explicit context caching exists only on the gemini wire; model "
            f"provider {provider!r} has none"
        )
    return None


def fallback_extras_problem(model: ModelSpec, builtin_tools: BuiltinTools) -> str | None:
    """Why a fallback cannot serve the agent's built-in tools, or None. (A context cache
    is each Gemini model's own; a fallback on another wire is sent the whole prompt.)"""
    for index, fallback in enumerate(model.fallbacks):
        problem = gemini_extras_problem(fallback.provider, builtin_tools, ContextCacheConfig())
        if problem is not None:
            return f"{problem} (fallbacks[{index}] of the model)"
    return None


ApprovalTimeout = Annotated[
    WaitSeconds,
    Field(
        description="How long a tool call that needs approval waits for its decision, unless "
        "its tool says otherwise; then it is rejected as timed out.",
    ),
]
"""The default wait for a decision on a tool call (`approval_timeout_s`)."""


class JournalConfig(BaseModel):
    """The call journal (docs/reliability.md#the-call-journal): each completed model and
    tool call kept beside the media store, so a call made again after a restore, a source
    replay or a rerun is answered from it instead."""

    model_config = _MODEL_CONFIG

    enabled: bool = Field(default=False, description="Keep and consult the call journal.")
    roll_s: float = Field(
        default=60.0, gt=0, description="How long a segment file is written before a new one."
    )
    keep_s: float = Field(
        default=3600.0,
        gt=0,
        description="How long a rolled segment is kept: longer than two checkpoint intervals "
        "plus a restart, or a restored call may be made again.",
    )


class FollowupConfig(BaseModel):
    """The built-in `schedule_followup` tool: whether the agent has it, and its bounds."""

    model_config = _MODEL_CONFIG

    enabled: bool = Field(
        default=False, description="Give the agent the `schedule_followup(after_s, note)` tool."
    )
    min_delay_s: float = Field(
        default=60.0,
        gt=0,
        le=LONGEST_WAIT_S,
        allow_inf_nan=False,
        description="Shortest delay the model may ask for; shorter is refused to it.",
    )
    max_delay_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        le=LONGEST_WAIT_S,
        allow_inf_nan=False,
        description="Longest delay the model may ask for; longer is refused to it.",
    )
    max_pending: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Follow-ups a key may have waiting; one more is refused to the model.",
    )
    cancel_on_input: bool = Field(
        default=True,
        description="A new input for the key cancels its waiting follow-ups (the customer "
        "wrote again, so the check is moot); false: they fire anyway.",
    )
    max_note_chars: int = Field(
        default=2000, ge=1, le=100_000, description="Longest note; longer is refused."
    )

    @model_validator(mode="after")
    def _delays_in_order(self) -> FollowupConfig:
        if self.min_delay_s > self.max_delay_s:
            raise ValueError(
                f"min_delay_s={self.min_delay_s:g} is above max_delay_s={self.max_delay_s:g}"
            )
        return self


def followup_key_problem(key_field: str, followups: FollowupConfig) -> str | None:
    """Why follow-ups cannot be on with this key field (None: they can): a follow-up's
    input line uses `id`, `text`, `parts` and `followup` for itself."""
    top = key_field.split(".")[0]
    if not followups.enabled or top not in ("id", "text", "parts", "followup"):
        return None
    return (
        f"followups: a follow-up's input line uses the field {top!r} for itself, so the "
        f"key field {key_field!r} cannot be under it; key the job by another field"
    )


class TelemetryConfig(BaseModel):
    """Where the operator sends live OpenTelemetry spans and metrics, and what spans hold.

    The job spec's `telemetry:` block is these fields, each optional (`TelemetrySpec`).
    Header values are secrets (`SecretStr`): no repr, log line or error shows them."""

    model_config = _MODEL_CONFIG

    otlp_endpoint: str = Field(
        pattern=r"^https?://\S+$",
        description="OTLP/HTTP collector URL; a bare host gets /v1/traces and /v1/metrics.",
    )
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="HTTP headers for the collector (e.g. Authorization)."
    )
    sample_ratio: float = Field(
        default=1.0, ge=0, le=1, description="Share of runs traced, decided by the trace id."
    )
    capture_content: bool = Field(
        default=False, description="Put message text and tool arguments/results in spans."
    )
    max_queue_spans: int = Field(
        default=2048, ge=1, description="Spans waiting for export; more are dropped and counted."
    )
    export_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="Timeout of one export request."
    )


WaitingInputs = Annotated[
    int,
    Field(
        ge=1,
        description=(
            "Inputs per subtask that may wait in keyed state behind their key's run; at the"
            " bound, an input for a busy key waits for that key's run instead."
        ),
    ),
]
"""The bound on inputs waiting in a subtask's keyed state (`max_waiting_inputs`)."""

WhileParked = Annotated[
    Literal["queue", "separate_run"],
    Field(
        description=(
            "What a new input of a key whose run is parked for an approval does: queue (wait"
            " behind it, one ordered conversation per key) or separate_run (start its own run"
            " at once while the parked run stays parked)."
        ),
    ),
]
"""Where a parked key's new inputs go (`while_parked`, see docs/approvals.md)."""

ParkedKeyInputs = Annotated[
    int,
    Field(
        ge=1,
        le=100_000,
        description=(
            "Inputs a key with a parked run may hold in keyed state, its parked runs and"
            " queued inputs together; a new input beyond it is a ParkedKeyFull dead letter."
        ),
    ),
]
"""The per-key bound on what a key with a parked run holds (`max_inputs_per_parked_key`)."""


class DecisionsConfig(BaseModel):
    """Where decisions on parked tool calls may come from (see docs/approvals.md)."""

    model_config = _MODEL_CONFIG

    from_input: bool = Field(
        default=False,
        description="Take decisions (lines with `approval`) on the main input. Off: a "
        "decision on the main input is a dead letter; decisions come from the job's approvals "
        "source only. Anyone who can write an input line can then decide.",
    )
    secret: SecretStr | None = Field(
        default=None,
        description="HMAC-SHA256 key (at least 16 characters; set it from ${ENV}): with it, "
        "a decision counts only with a valid `signature` (see docs/approvals.md).",
    )

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value()) < 16:
            raise ValueError("decisions.secret must be at least 16 characters")
        return secret


class ToolRef(BaseModel):
    """A tool by import path, with whether its calls need a person's approval."""

    model_config = _MODEL_CONFIG

    ref: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description='Import path, "package.module:function".',
    )
    approval: ApprovalRule | None = Field(
        default=None,
        description="required: every call waits for a decision; none: no call does; "
        "unset: as the tool itself declares (`@tool(requires_approval=...)`).",
    )
    approval_timeout_s: CallApprovalTimeout = None
    allow_edits: bool = Field(
        default=False,
        description="Whether an approving decision may change the call's arguments; off: "
        "a decision with other arguments is a dead letter and the call still waits.",
    )
    by_tool_name: bool = Field(
        default=False,
        description="Whether a decision may name the call by this tool's name (and `match`) "
        "instead of its call_id; off: such a decision is a dead letter.",
    )
    side_effects: bool = Field(
        default=False,
        description="Whether a call changes something outside the agent (sends, pays, "
        "writes): such a tool never runs in a replay.",
    )
    replay: Literal["recorded", "live"] = Field(
        default="recorded",
        description="In a replay, a call the recording does not have: recorded gives an error "
        "result saying so; live runs it (read-only tools only).",
    )

    @model_validator(mode="after")
    def _timeout_needs_approval(self) -> ToolRef:
        if self.approval == "none" and self.approval_timeout_s is not None:
            raise ValueError("approval_timeout_s applies only to a tool whose calls need approval")
        return self

    @model_validator(mode="after")
    def _live_replay_only_when_safe(self) -> ToolRef:
        problem = live_replay_problem(self.replay, self.approval == "required", self.side_effects)
        if problem is not None:
            raise ValueError(problem)
        return self


def live_replay_problem(replay: str, needs_approval: bool, side_effects: bool) -> str | None:
    """Why a tool may not run live in a replay (it needs approval, or has side effects)."""
    if replay != "live":
        return None
    if needs_approval:
        return "replay: live is refused for a tool whose calls need approval"
    if side_effects:
        return "replay: live is refused for a tool declared side_effects: true"
    return None


class AgentSettings(BaseModel):
    """What the agent does with each input — prompt, tools, concurrency, bounds, budgets,
    Gemini extras — declared once for `AgentConfig` and a job spec's `agent:` block."""

    model_config = _MODEL_CONFIG

    system_prompt: str = Field(default="", description="System instruction of every request.")
    tools: list[str | ToolRef] = Field(
        default_factory=list,
        description='Tools: import paths, "package.module:function", or `ToolRef`s.',
    )
    mcp_servers: list[McpServer] = Field(
        default_factory=list,
        description="MCP servers whose allowed tools the agent is offered, named "
        "`mcp__<server>__<tool>` (see docs/mcp-tools.md).",
    )
    approval_timeout_s: ApprovalTimeout = 86400.0
    decisions: DecisionsConfig = Field(
        default_factory=DecisionsConfig,
        description="Where decisions on parked tool calls may come from.",
    )
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description="Short-term memory.")
    budgets: Budgets = Field(default_factory=Budgets, description="Per-run limits.")
    max_in_flight: int = Field(default=64, ge=1, description="Runs in flight per subtask.")
    max_waiting_inputs: WaitingInputs = 256
    while_parked: WhileParked = "queue"
    max_inputs_per_parked_key: ParkedKeyInputs = 32
    tool_timeout_s: float = Field(default=60.0, gt=0, description="Timeout of one tool call.")
    max_tool_result_bytes: int = Field(
        default=DEFAULT_MAX_RESULT_BYTES,
        ge=1,
        description="Largest tool result (text and inline media bytes); larger is an error.",
    )
    offload_threshold_bytes: int = Field(
        default=65536, ge=0, description="Inline media larger than this goes to the store."
    )
    input_limits: InputLimits = Field(
        default_factory=InputLimits, description="Bounds of one input line."
    )
    builtin_tools: BuiltinTools = Field(
        default_factory=BuiltinTools,
        description="Gemini built-in server tools: google_search, url_context, code_execution.",
    )
    context_cache: ContextCacheConfig = Field(
        default_factory=ContextCacheConfig,
        description="Gemini explicit context caching: enabled, ttl_s, min_tokens.",
    )
    documents: list[str] = Field(
        default_factory=list,
        description="Documents (local files or URLs) sent at the start of every request, "
        "in the context cache when it is on.",
    )
    followups: FollowupConfig = Field(
        default_factory=FollowupConfig,
        description="Scheduled follow-ups (the built-in `schedule_followup` tool).",
    )
    journal: JournalConfig = Field(
        default_factory=JournalConfig,
        description="The call journal: completed calls answered from it, not made twice.",
    )

    @field_validator("mcp_servers")
    @classmethod
    def _unique_server_names(cls, servers: list[McpServer]) -> list[McpServer]:
        names = [server.name for server in servers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"MCP server names must be unique; given twice: {', '.join(twice)}")
        return servers

    def settings(self) -> dict[str, Any]:
        """These settings (and only these) as keyword arguments, values as they are."""
        return {name: getattr(self, name) for name in AgentSettings.model_fields}


class AgentConfig(AgentSettings):
    """Everything the agent runtime needs to run one agent per key: the agent's settings,
    the model, and where the job puts its key, media and events."""

    job_id: str = Field(default="streamagents", description="Job name written into events.")
    model: ModelSpec = Field(description="The chat model.")
    key_field: str = Field(default="key", description="Dotted path of the key in an input.")
    media_store: str = Field(default="media", description="Media store root: path or URI.")
    input_media: InputMedia = Field(
        default_factory=InputMedia,
        description="Where an input line's media may come from (the source's `media`).",
    )
    event_log_level: str = Field(
        default="standard", description='Event log level: "off", "standard" or "verbose".'
    )
    telemetry: TelemetryConfig | None = Field(
        default=None, description="Live OpenTelemetry spans and metrics; None sends none."
    )
    replay: bool = Field(
        default=False,
        description="Run every input as a replay of a recorded run (`streamagents replay` "
        "sets it): run ids in the replay namespace, tool calls answered from the recording.",
    )
    subtasks: int = Field(
        default=1,
        ge=1,
        description="Parallel subtasks running this agent, set by the operator when it opens: "
        "the model's limits are shared out over them.",
    )
    known_secrets: tuple[SecretStr, ...] = Field(
        default=(),
        description="Secret values from outside this config that nothing emitted may carry "
        "(a job gives the `${ENV}` values its spec puts in secret fields, Kafka passwords "
        "among them); the config's own credentials need not be listed.",
    )

    def redactor(self) -> Redactor:
        """What every record, event and span this agent emits passes: its known secrets and
        its own credentials (the models' options, MCP servers' env and headers, telemetry
        headers, the decisions secret, user info and query values of its URLs) replaced,
        then every secret shape. Built where the operator opens, once."""
        values = [secret.get_secret_value() for secret in self.known_secrets]
        for target in self.model.chain():
            values += target.secret_values()
        for server in self.mcp_servers:
            values += server.secrets()
            if isinstance(server.transport, McpHttp):
                values += url_secrets(server.transport.url)
        if self.telemetry is not None:
            values += [header.get_secret_value() for header in self.telemetry.headers.values()]
            values += url_secrets(self.telemetry.otlp_endpoint)
        if self.decisions.secret is not None:
            values.append(self.decisions.secret.get_secret_value())
        return Redactor.of([*values, *url_secrets(self.media_store)])

    @model_validator(mode="after")
    def _extras_on_gemini_only(self) -> AgentConfig:
        problem = gemini_extras_problem(
            self.model.provider, self.builtin_tools, self.context_cache
        ) or fallback_extras_problem(self.model, self.builtin_tools)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _followup_lines_can_hold_the_key(self) -> AgentConfig:
        problem = followup_key_problem(self.key_field, self.followups)
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_validator("event_log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        return LogLevel.parse(value).value
