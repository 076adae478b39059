"""What a provider model takes, declared once for the adapters and the job spec: its client
options (`options:`) and its generation options (`generation:`), typed per provider.

Nothing here imports an SDK, so the agent config and the spec check a model's options by
its provider name alone (`client_options`, `generation_options`). An unknown key is an
error naming it, the nearest known key and the known ones (`checked`), at the key's own
place in the error's location, so a spec names its line.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from streamagents.connectors.providers.retry import RetryBudgetSettings, RetryPolicy
from streamagents.serde.safe_text import url_secrets

__all__ = [
    "GeminiGeneration",
    "GeminiInteractionsGeneration",
    "GeminiInteractionsOptions",
    "GeminiOptions",
    "ModelOptions",
    "OpenAIChatGeneration",
    "OpenAIOptions",
    "OpenAIResponsesGeneration",
    "checked",
    "client_options",
    "generation_options",
]

_SETTINGS = ConfigDict(frozen=True, extra="forbid")
ModelT = TypeVar("ModelT", bound=BaseModel)
_HIDDEN = "[hidden]"


class ModelOptions(BaseModel):
    """The client options every adapter takes (a spec's `agent.model.options`); a family
    extends them with its own."""

    model_config = _SETTINGS

    api_key: str | None = Field(
        default=None,
        repr=False,
        description="The provider API key; unset: the family's environment variable.",
    )
    base_url: str | None = Field(
        default=None,
        description="Where the API is served (a compatible server, a proxy, the loopback stub).",
    )
    timeout: float | None = Field(
        default=60.0, gt=0, description="Seconds one attempt may take; null: no limit."
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        description="Retries of a failed call after its first attempt (0: none, but the one "
        "extra attempt after a silent empty reply).",
    )
    retry: RetryPolicy = Field(
        default_factory=RetryPolicy,
        description="How long the retries wait: backoff, jitter and the time a call may take.",
    )
    retry_budget: RetryBudgetSettings = Field(
        default_factory=RetryBudgetSettings,
        description="The token bucket the model's retries spend from (each model its own).",
    )
    transport: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp",
        description="The SDK's HTTP transport: aiohttp (about half the CPU per call of httpx) "
        "or httpx (the SDK's default, for an httpx-only proxy or mTLS setup).",
    )

    def secret_values(self) -> list[str]:
        """Every credential these options hold (the API key, the base URL's user info and
        query values), which no error text may carry."""
        return [value for value in (self.api_key, *url_secrets(self.base_url)) if value]


class GeminiOptions(ModelOptions):
    """The shared client options plus Gemini's own (Vertex AI, API version, tool media)."""

    vertexai: bool = Field(
        default=False,
        description="Reach the model through Vertex AI (Google credentials), not the Gemini API.",
    )
    project: str | None = Field(default=None, description="Vertex AI project.")
    location: str | None = Field(default=None, description="Vertex AI location.")
    api_version: str | None = Field(
        default=None, description="API version in the path; unset: the SDK's."
    )
    legacy_tool_media: bool = Field(
        default=False,
        description="Send tool-result media as sibling parts, for models that refuse them "
        "inside a function response.",
    )


class GeminiInteractionsOptions(GeminiOptions):
    """The Gemini client options plus the Interactions API's own (storing and continuing)."""

    store: bool = Field(
        default=True, description="Ask the server to store each interaction (the body's store)."
    )
    continue_stored: bool = Field(
        default=True,
        description="With store, send only the steps after the stored interaction a request "
        "names (previous_interaction_id), not the whole conversation.",
    )
    stream: bool = Field(
        default=False,
        description="Read each reply as server-sent events; a cut stream is resumed.",
    )
    max_stream_resumes: int = Field(
        default=3,
        ge=0,
        description="Resumed reads of one reply, in a row, that may bring no new event.",
    )


class OpenAIOptions(ModelOptions):
    """The shared client options plus OpenAI's own (organization, extra headers)."""

    organization: str | None = Field(
        default=None, description="The OpenAI organization the calls are billed to."
    )
    default_headers: dict[str, str] | None = Field(
        default=None,
        repr=False,
        description="Extra HTTP headers on every call (may carry credentials, never shown).",
    )

    def secret_values(self) -> list[str]:
        """The shared options' credentials and every extra header's value."""
        return [*super().secret_values(), *(self.default_headers or {}).values()]


class _Generation(BaseModel):
    """Generation options of one wire: every key the wire sends, each under its own name or
    a neutral one the wire renames (`max_tokens`, `stop`)."""

    model_config = _SETTINGS

    temperature: float | None = Field(default=None, description="Sampling temperature.")
    top_p: float | None = Field(default=None, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(
        default=None, description="Output tokens at most (renamed to the wire's own name)."
    )


class GeminiGeneration(_Generation):
    """Gemini generateContent's generation options: the fields of the SDK's
    `GenerateContentConfig` but those the wire sets itself (system instruction, tools,
    tool config); `max_tokens` and `stop` are its `max_output_tokens` and `stop_sequences`."""

    stop: list[str] | str | None = Field(default=None, description="Stop sequences.")
    top_k: float | None = Field(default=None, description="Top-k sampling.")
    presence_penalty: float | None = Field(default=None, description="Presence penalty.")
    frequency_penalty: float | None = Field(default=None, description="Frequency penalty.")
    candidate_count: int | None = Field(default=None, description="Candidates per reply.")
    max_output_tokens: int | None = Field(default=None, description="Output tokens at most.")
    seed: int | None = Field(default=None, description="Sampling seed.")
    logprobs: int | None = Field(default=None, description="Top log probabilities returned.")
    response_logprobs: bool | None = Field(default=None, description="Return log probabilities.")
    stop_sequences: list[str] | None = Field(default=None, description="Stop sequences.")
    response_mime_type: str | None = Field(default=None, description="Reply MIME type.")
    response_json_schema: Any = Field(default=None, description="Reply JSON schema.")
    response_schema: Any = Field(default=None, description="Reply schema (the SDK's type).")
    response_modalities: list[str] | None = Field(default=None, description="Reply kinds.")
    thinking_config: Any = Field(default=None, description="thinking_budget, include_thoughts.")
    labels: dict[str, str] | None = Field(default=None, description="Billing labels.")
    safety_settings: Any = Field(default=None, description="Safety thresholds.")
    cached_content: str | None = Field(default=None, description="A context cache to use.")
    media_resolution: Any = Field(default=None, description="Resolution of input media.")
    speech_config: Any = Field(default=None, description="Speech output.")
    audio_timestamp: bool | None = Field(default=None, description="Timestamps in audio.")
    audio_transcription_config: Any = Field(default=None, description="Audio transcription.")
    image_config: Any = Field(default=None, description="Image output.")
    routing_config: Any = Field(default=None, description="Model routing (Vertex AI).")
    model_selection_config: Any = Field(default=None, description="Model selection.")
    model_armor_config: Any = Field(default=None, description="Model Armor (Vertex AI).")
    generation_output_config: Any = Field(default=None, description="Output settings.")
    service_tier: Any = Field(default=None, description="Service tier.")
    store: bool | None = Field(default=None, description="Store the request.")
    enable_enhanced_civic_answers: bool | None = Field(default=None, description="Civic answers.")
    automatic_function_calling: Any = Field(default=None, description="SDK-side tool calling.")
    automatic_continuation: Any = Field(default=None, description="SDK-side continuation.")
    continuation_token: Any = Field(default=None, description="Continuation token.")
    should_return_http_response: bool | None = Field(default=None, description="Raw reply.")
    http_options: Any = Field(default=None, description="Per-request HTTP options.")


class GeminiInteractionsGeneration(_Generation):
    """The Interactions API's generation options: its `generation_config` fields and the
    body's own fields; `max_tokens` and `stop` are `max_output_tokens` and `stop_sequences`."""

    stop: list[str] | str | None = Field(default=None, description="Stop sequences.")
    max_output_tokens: int | None = Field(default=None, description="Output tokens at most.")
    stop_sequences: list[str] | str | None = Field(default=None, description="Stop sequences.")
    seed: int | None = Field(default=None, description="Sampling seed.")
    thinking_level: str | None = Field(default=None, description="How much the model thinks.")
    thinking_summaries: str | None = Field(default=None, description="Thought summaries.")
    tool_choice: str | list[str] | None = Field(
        default=None, description="auto, none, required, a tool name or a list of them."
    )
    image_config: Any = Field(default=None, description="Image output.")
    speech_config: Any = Field(default=None, description="Speech output.")
    transcription_config: Any = Field(default=None, description="Audio transcription.")
    video_config: Any = Field(default=None, description="Video input.")
    response_format: Any = Field(default=None, description="Reply format (body field).")
    response_mime_type: str | None = Field(default=None, description="Reply MIME type.")
    response_modalities: list[str] | None = Field(default=None, description="Reply kinds.")
    safety_settings: Any = Field(default=None, description="Safety thresholds.")
    service_tier: Any = Field(default=None, description="Service tier.")
    cached_content: str | None = Field(default=None, description="A context cache to use.")
    labels: dict[str, str] | None = Field(default=None, description="Billing labels.")


class _OpenAIGeneration(_Generation):
    """What both OpenAI wires take besides their own fields; `extra_body`'s entries are
    body fields of an OpenAI-compatible server's own (vLLM's `top_k`, ...), sent as they are."""

    extra_body: dict[str, Any] | None = Field(
        default=None, description="Further body fields, for an OpenAI-compatible server."
    )
    metadata: dict[str, str] | None = Field(default=None, description="Request metadata.")
    parallel_tool_calls: bool | None = Field(default=None, description="Calls in parallel.")
    prompt_cache_key: str | None = Field(default=None, description="Prompt cache key.")
    prompt_cache_retention: str | None = Field(default=None, description="Cache retention.")
    prompt_cache_options: Any = Field(default=None, description="Prompt cache options.")
    safety_identifier: str | None = Field(default=None, description="End-user identifier.")
    service_tier: str | None = Field(default=None, description="Service tier.")
    store: bool | None = Field(default=None, description="Store the completion.")
    stream_options: Any = Field(default=None, description="Streaming options.")
    tool_choice: Any = Field(default=None, description="Which tool the model must call.")
    top_logprobs: int | None = Field(default=None, description="Top log probabilities.")
    user: str | None = Field(default=None, description="End-user identifier (deprecated).")
    moderation: Any = Field(default=None, description="Moderation settings.")


class OpenAIChatGeneration(_OpenAIGeneration):
    """Chat Completions' generation options: `chat.completions.create`'s parameters but
    those the wire sets itself (messages, model, tools); `max_tokens` is sent as
    `max_completion_tokens`."""

    max_completion_tokens: int | None = Field(default=None, description="Output tokens at most.")
    stop: list[str] | str | None = Field(default=None, description="Stop sequences.")
    seed: int | None = Field(default=None, description="Sampling seed.")
    n: int | None = Field(default=None, description="Choices per reply.")
    presence_penalty: float | None = Field(default=None, description="Presence penalty.")
    frequency_penalty: float | None = Field(default=None, description="Frequency penalty.")
    logit_bias: dict[str, int] | None = Field(default=None, description="Token biases.")
    logprobs: bool | None = Field(default=None, description="Return log probabilities.")
    reasoning_effort: str | None = Field(default=None, description="Reasoning effort.")
    verbosity: str | None = Field(default=None, description="Reply verbosity.")
    response_format: Any = Field(default=None, description="text, json_object, json_schema.")
    modalities: list[str] | None = Field(default=None, description="Reply kinds.")
    audio: Any = Field(default=None, description="Audio output.")
    prediction: Any = Field(default=None, description="Predicted output.")
    web_search_options: Any = Field(default=None, description="Web search.")
    functions: Any = Field(default=None, description="Legacy function declarations.")
    function_call: Any = Field(default=None, description="Legacy function choice.")


class OpenAIResponsesGeneration(_OpenAIGeneration):
    """The Responses API's generation options: `responses.create`'s parameters but those
    the wire sets itself (input, instructions, model, tools); `max_tokens` is sent as
    `max_output_tokens`."""

    max_output_tokens: int | None = Field(default=None, description="Output tokens at most.")
    max_tool_calls: int | None = Field(default=None, description="Built-in tool calls at most.")
    reasoning: Any = Field(default=None, description="effort, summary.")
    text: Any = Field(default=None, description="Reply format and verbosity.")
    truncation: str | None = Field(default=None, description="auto or disabled.")
    include: list[str] | None = Field(default=None, description="Extra output to include.")
    background: bool | None = Field(default=None, description="Run in the background.")
    background_options: Any = Field(default=None, description="Background run options.")
    context_management: Any = Field(default=None, description="Context management.")
    conversation: Any = Field(default=None, description="The conversation it belongs to.")
    previous_response_id: str | None = Field(default=None, description="Response continued.")
    prompt: Any = Field(default=None, description="A stored prompt template.")
    image: Any = Field(default=None, description="Image generation settings.")
    access_programs: Any = Field(default=None, description="Access programs.")


_CLIENT_OPTIONS: dict[str, type[ModelOptions]] = {
    "gemini": GeminiOptions,
    "gemini-interactions": GeminiInteractionsOptions,
    "openai": OpenAIOptions,
    "openai-responses": OpenAIOptions,
}
_GENERATION_OPTIONS: dict[str, type[_Generation]] = {
    "gemini": GeminiGeneration,
    "gemini-interactions": GeminiInteractionsGeneration,
    "openai": OpenAIChatGeneration,
    "openai-responses": OpenAIResponsesGeneration,
}


def client_options(provider: str) -> type[ModelOptions]:
    """The client options a provider's adapter takes; raises `ValueError` for a name that
    is not a provider."""
    return _CLIENT_OPTIONS[_known(provider)]


def generation_options(provider: str) -> type[BaseModel]:
    """The generation options a provider's wire takes; raises `ValueError` for a name that
    is not a provider."""
    return _GENERATION_OPTIONS[_known(provider)]


def _known(provider: str) -> str:
    """`provider`, when it names a provider; else a `ValueError` listing those there are."""
    if provider not in _CLIENT_OPTIONS:
        known = ", ".join(_CLIENT_OPTIONS)
        raise ValueError(f"unknown model provider {provider!r}; known: {known}")
    return provider


def checked(kind: type[ModelT], given: Mapping[str, Any], what: str) -> ModelT:
    """`given` validated as `kind` (`what` names it in errors: "option", "generation
    option"); raises `ValidationError` whose unknown keys are named with the nearest known
    key, each at its own location. No error shows a text given (an option may be a key)."""
    try:
        return kind.model_validate(given)
    except ValidationError as error:
        details = [_explained(kind, dict(found), what) for found in error.errors()]
        raise ValidationError.from_exception_data(error.title, details) from None


def _explained(kind: type[BaseModel], error: dict[str, Any], what: str) -> InitErrorDetails:
    """One error as it is, or, for an unknown key, one naming the keys it could have been."""
    loc = tuple(error["loc"])
    if error["type"] != "extra_forbidden":
        detail = InitErrorDetails(type=error["type"], loc=loc, input=_shown(error["input"]))
        if "ctx" in error:
            detail["ctx"] = error["ctx"]
        return detail
    known = _fields_at(kind, loc[:-1])
    key = str(loc[-1])
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    setting = what if len(loc) == 1 else f"{'.'.join(map(str, loc[:-1]))} setting"
    message = f"unknown {setting} {key!r}{hint} (known: {', '.join(sorted(known))})"
    return InitErrorDetails(
        type=PydanticCustomError("unknown_option", "{message}", {"message": message}),
        loc=loc,
        input=_shown(error["input"]),
    )


def _shown(value: Any) -> Any:
    """A value as an error may show it: numbers, flags and null as they are, others hidden
    (text may be a secret), a mapping or list by its kind alone (empty)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {}
    return [] if isinstance(value, list | tuple) else _HIDDEN


def _fields_at(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """The field names of the model at `path` inside `model` (its fields' model types)."""
    current: Any = model
    for element in path:
        field = current.model_fields.get(str(element)) if _is_model(current) else None
        if field is None:
            return []
        kinds = (field.annotation, *get_args(field.annotation))
        current = next((kind for kind in kinds if _is_model(kind)), None)
    return list(current.model_fields) if _is_model(current) else []


def _is_model(value: Any) -> bool:
    """Whether `value` is a pydantic model class."""
    return isinstance(value, type) and issubclass(value, BaseModel)
