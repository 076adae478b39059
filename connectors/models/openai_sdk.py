"""What both OpenAI wires share: the `openai` client (its retries off) and error mapping.

The wire modules (`openai_chat`, `openai_responses`) subclass `OpenAIModelBase` and name
their pure `to_request`/`from_response` functions and the SDK call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import openai
import pydantic

from streamagents.connectors.media import MediaStore
from streamagents.connectors.models.clients import SDKChatModel, transport_error
from streamagents.connectors.models.errors import (
    BadRequest,
    ConnectionFailed,
    EmptyResponseError,
    MalformedResponse,
    ProviderError,
    RateLimited,
    RequestTimeout,
    ServerError,
)
from streamagents.connectors.models.prepare import MessageLike, ToolLike
from streamagents.connectors.models.retry import RetryBudget, RetryPolicy, parse_retry_after
from streamagents.serde.chat import ChatResponse, TokenUsage
from streamagents.serde.messages import ChatMessage, ToolCall
from streamagents.serde.safe_text import scrub

__all__ = ["OpenAIModelBase", "map_openai_error", "parse_arguments"]


def parse_arguments(raw: str | None, name: str, provider: str) -> dict[str, Any]:
    """A tool call's JSON arguments as a dict; `MalformedResponse` when they are not one."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise MalformedResponse(
            f"the arguments of the call to {name!r} are not a JSON object", provider=provider
        )
    return value


def assistant_reply(
    text: str,
    calls: list[ToolCall],
    *,
    finish: str | None,
    usage: tuple[int | None, int | None] | None,
    model_version: str,
    latency_ms: float,
    provider: str,
    empty: str,
) -> ChatResponse:
    """The neutral response both OpenAI wires build; `empty` explains a silent empty reply."""
    if not text and not calls and finish is None:
        raise EmptyResponseError(empty, provider=provider)
    input_tokens, output_tokens = usage or (0, 0)
    return ChatResponse(
        message=ChatMessage(role="assistant", content=text, tool_calls=calls),
        usage=TokenUsage(input_tokens=input_tokens or 0, output_tokens=output_tokens or 0),
        finish_reason=finish,
        model_version=model_version,
        latency_ms=latency_ms,
    )


def map_openai_error(
    error: Exception, provider: str, api_key: str | None, timeout: float | None
) -> ProviderError | None:
    """Our error for an `openai` SDK exception (None when it is not one we map)."""
    if isinstance(error, openai.APIStatusError):
        body = error.body
        detail = body if isinstance(body, dict) else {}
        raw = detail.get("message") or (body if isinstance(body, str) else None) or "no message"
        code = detail.get("code") or detail.get("type")
        facts: dict[str, Any] = {
            "provider": provider,
            "status": error.status_code,
            "code": None if code is None else str(code),
            "retry_after": parse_retry_after(dict(error.response.headers)),
        }
        message = scrub(str(raw), [api_key])
        if error.status_code == 429:
            return RateLimited(message, **facts)
        if error.status_code >= 500:
            return ServerError(message, **facts)
        return BadRequest(message, **facts)
    if isinstance(error, openai.APITimeoutError):
        return RequestTimeout(f"no reply within {timeout} s", provider=provider)
    if isinstance(error, openai.APIConnectionError):
        return ConnectionFailed("connection failed", provider=provider)
    if isinstance(
        error, json.JSONDecodeError | pydantic.ValidationError | openai.APIResponseValidationError
    ):
        return MalformedResponse(
            f"the reply body is not valid JSON for this API ({type(error).__name__})",
            provider=provider,
        )
    return transport_error(error, provider, timeout)


class OpenAIModelBase(SDKChatModel[openai.AsyncOpenAI]):
    """An OpenAI (or OpenAI-compatible: vLLM, Ollama, Azure) model reached with `openai`.

    A subclass names its wire: `wire_to_request`/`wire_from_response` (the wire module's
    pure functions) and `_send` (the SDK call).
    """

    provider = "openai"
    wire_to_request: ClassVar[Callable[..., dict[str, Any]]]
    wire_from_response: ClassVar[Callable[..., ChatResponse]]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        retry_budget: RetryBudget | None = None,
        media_store: MediaStore | None = None,
        generation: Mapping[str, Any] | None = None,
        organization: str | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and base_url is None:
            raise ValueError(
                f"{type(self).__name__} needs an API key: pass api_key= or set OPENAI_API_KEY "
                "(a server given by base_url may accept any key)"
            )
        self.organization = organization
        self.default_headers = dict(default_headers or {})
        super().__init__(
            model,
            api_key=key or "unused",
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            retry=retry,
            retry_budget=retry_budget,
            media_store=media_store,
            generation=generation,
        )

    def _new_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            organization=self.organization,
            timeout=self.timeout,
            max_retries=0,
            default_headers=self.default_headers or None,
        )

    def _to_request(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike], options: dict[str, Any]
    ) -> dict[str, Any]:
        return type(self).wire_to_request(messages, tools, options, store=self.media_store)

    def _parse(self, reply: Any, latency_ms: float) -> ChatResponse:
        return type(self).wire_from_response(reply, model=self.model, latency_ms=latency_ms)

    def _map_error(self, error: Exception) -> ProviderError | None:
        return map_openai_error(error, self.provider, self.api_key, self.timeout)

    async def _close(self, client: openai.AsyncOpenAI) -> None:
        await client.close()
