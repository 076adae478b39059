"""The shell every adapter shares: SDK client per event loop, the retried call, transport faults.

An adapter (`GeminiChatModel`, the OpenAI models) subclasses `SDKChatModel` and supplies
four small pieces: how to build its SDK client, the SDK call, how to parse the reply and
how to map the SDK's exceptions. Building the request, retrying, timing and closing are
done here, the same way for every provider.

An async SDK client holds connections tied to the event loop that opened them, and
`chat()` runs each call in a fresh loop, so the shell keeps one client per running loop
and builds a new one when the loop changes.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from streamagents.connectors.media import MediaStore
from streamagents.connectors.models.base import ChatModel
from streamagents.connectors.models.errors import ConnectionFailed, ProviderError, RequestTimeout
from streamagents.connectors.models.prepare import MessageLike, ToolLike
from streamagents.connectors.models.retry import (
    RetryBudget,
    RetryPolicy,
    call_with_retries,
    policy_from,
)
from streamagents.serde.chat import ChatResponse

__all__ = ["LoopBoundClient", "SDKChatModel", "transport_error"]

C = TypeVar("C")


def _http_exception_types(name: str) -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found.append(getattr(module, name))
    return tuple(found)


_TIMEOUTS = (TimeoutError, asyncio.TimeoutError, *_http_exception_types("TimeoutException"))
_TRANSPORT = (OSError, *_http_exception_types("TransportError"))


def transport_error(
    error: BaseException, provider: str, timeout: float | None
) -> ProviderError | None:
    """The `RequestTimeout`/`ConnectionFailed` for an HTTP-library failure, else None."""
    if isinstance(error, _TIMEOUTS):
        return RequestTimeout(f"no reply within {timeout} s", provider=provider)
    if isinstance(error, _TRANSPORT):
        return ConnectionFailed(f"connection failed ({type(error).__name__})", provider=provider)
    return None


class LoopBoundClient(Generic[C]):
    """Builds an SDK client lazily, once per running event loop."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: C | None = None

    def get(self) -> C:
        """The client for the running loop (built on first use in that loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client

    def take_current(self) -> C | None:
        """Detach and return the client when it belongs to the running loop, else None."""
        client, same_loop = self._client, self._loop is asyncio.get_running_loop()
        self._client, self._loop = None, None
        return client if same_loop else None


class SDKChatModel(ChatModel, Generic[C]):
    """A `ChatModel` over an async SDK client: build, send with retries, parse, map errors."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout: float | None,
        max_retries: int | None,
        retry: RetryPolicy | None,
        retry_budget: RetryBudget | None,
        media_store: MediaStore | None,
        generation: Mapping[str, Any] | None,
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.base_url = base_url
        self.timeout = timeout
        self.retry = policy_from(retry, max_retries)
        self.retry_budget = retry_budget or RetryBudget()
        self.media_store = media_store
        self.generation = dict(generation or {})
        self._rng = random.Random()
        self._client: LoopBoundClient[C] = LoopBoundClient(self._new_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the settings only (a Flink function may carry the model); SDK clients stay."""
        state = self.__dict__.copy()
        del state["_client"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client = LoopBoundClient(self._new_client)

    def build_request(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike] = (), **options: Any
    ) -> Any:
        """The request `achat` would send: this model's store, defaults and `options` applied."""
        return self._to_request(messages, tools, {**self.generation, **options})

    @abstractmethod
    def _to_request(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike], options: dict[str, Any]
    ) -> Any:
        """Call the wire module's `to_request`."""

    @abstractmethod
    def _new_client(self) -> C:
        """Build the SDK client (its own retries off)."""

    @abstractmethod
    async def _send(self, client: C, request: Any) -> Any:
        """Make the SDK call."""

    @abstractmethod
    def _parse(self, reply: Any, latency_ms: float) -> ChatResponse:
        """Call the wire module's `from_response`."""

    @abstractmethod
    def _map_error(self, error: Exception) -> ProviderError | None:
        """Our error for an SDK exception, or None to let it propagate."""

    @abstractmethod
    async def _close(self, client: C) -> None:
        """Release the SDK client's connections."""

    async def achat(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike] = (),
        **options: Any,
    ) -> ChatResponse:
        """Build the request (raising before anything is sent), then send it with retries."""
        request = self.build_request(messages, tools, **options)
        started = time.monotonic()

        async def attempt() -> ChatResponse:
            failure: ProviderError | None = None
            try:
                reply = await self._send(self._client.get(), request)
            except Exception as error:
                failure = self._map_error(error)
                if failure is None:
                    raise
            if failure is not None:
                raise failure  # outside the except block: the SDK error is not chained
            return self._parse(reply, (time.monotonic() - started) * 1000)

        return await call_with_retries(attempt, self.retry, self.retry_budget, self._rng)

    async def aclose(self) -> None:
        """Close the SDK client of the running loop, if any."""
        client = self._client.take_current()
        if client is not None:
            await self._close(client)
