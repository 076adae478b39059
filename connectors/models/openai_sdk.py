"""The shell both OpenAI wires share: the `openai` client, retries and error mapping.

`OpenAIModelBase` builds an `AsyncOpenAI` client per event loop with the SDK's retries
off, sends what a wire module built, and maps the SDK's exceptions onto our hierarchy.
The wire modules (`openai_chat`, `openai_responses`) supply request building, the call
and reply parsing.
"""

from __future__ import annotations

import json
import os
import random
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import openai
import pydantic

from streamagents.connectors.media import MediaStore
from streamagents.connectors.models.base import ChatModel
from streamagents.connectors.models.clients import LoopBoundClient, transport_error
from streamagents.connectors.models.errors import (
    BadRequest,
    ConnectionFailed,
    MalformedResponse,
    ProviderError,
    RateLimited,
    RequestTimeout,
    ServerError,
    scrub,
)
from streamagents.connectors.models.prepare import MessageLike, ToolLike
from streamagents.connectors.models.retry import (
    RetryBudget,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
    policy_from,
)
from streamagents.serde.chat import ChatResponse

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


class OpenAIModelBase(ChatModel):
    """An OpenAI (or OpenAI-compatible: vLLM, Ollama, Azure) model reached with `openai`."""

    provider = "openai"

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
        organization: str | None = None,
        default_headers: Mapping[str, str] | None = None,
        generation: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and base_url is None:
            raise ValueError(
                f"{type(self).__name__} needs an API key: pass api_key= or set OPENAI_API_KEY "
                "(a server given by base_url may accept any key)"
            )
        self.api_key = key or "unused"
        self.base_url = base_url
        self.timeout = timeout
        self.retry = policy_from(retry, max_retries)
        self.retry_budget = retry_budget or RetryBudget()
        self.media_store = media_store
        self.organization = organization
        self.default_headers = dict(default_headers or {})
        self.generation = dict(generation or {})
        self._rng = random.Random()
        self._client: LoopBoundClient[openai.AsyncOpenAI] = LoopBoundClient(self._new_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def _new_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            organization=self.organization,
            timeout=self.timeout,
            max_retries=0,
            default_headers=self.default_headers or None,
        )

    def build_request(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike] = (), **options: Any
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK call `achat` would make (model excluded)."""
        return self._to_request(messages, tools, {**self.generation, **options})

    @abstractmethod
    def _to_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike],
        options: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Call the wire module's `to_request` with this model's store."""

    @abstractmethod
    async def _send(self, client: openai.AsyncOpenAI, request: dict[str, Any]) -> Any:
        """Make the SDK call."""

    @abstractmethod
    def _parse(self, reply: Any, latency_ms: float) -> ChatResponse:
        """The neutral response for the SDK's reply object."""

    async def achat(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike] = (),
        **options: Any,
    ) -> ChatResponse:
        """Send one request (retrying per policy) and return the reply."""
        request = self.build_request(messages, tools, **options)
        started = time.monotonic()

        async def attempt() -> ChatResponse:
            failure: ProviderError | None = None
            try:
                reply = await self._send(self._client.get(), request)
            except Exception as error:
                failure = map_openai_error(error, self.provider, self.api_key, self.timeout)
                if failure is None:
                    raise
            if failure is not None:
                raise failure
            return self._parse(reply, (time.monotonic() - started) * 1000)

        return await call_with_retries(attempt, self.retry, self.retry_budget, self._rng)

    async def aclose(self) -> None:
        """Close the SDK client of the running loop, if any."""
        client = self._client.take_current()
        if client is not None:
            await client.close()
