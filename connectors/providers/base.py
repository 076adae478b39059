"""The base every provider adapter builds on: the `ChatModel` interface and the SDK shell.

`ChatModel` is the provider-neutral interface (messages and tools in, a response out).
`SDKChatModel` is the shell every adapter shares: its client options (`ModelOptions`, from
`options`, which a family extends with its own), what the operator gives it (media store,
generation defaults, rate limits, uploads), one SDK client per event loop, the retried
call, and the mapping of failures onto our errors. An adapter subclasses it and overrides a few
methods: how to fill in its API key, build its SDK client, build the request (its wire's
`to_request`), make the SDK call, parse the reply (its wire's `from_response`), map its
SDK's own exceptions, and close the client. Building, retrying, timing, HTTP status
mapping and transport faults are done here, the same way for every provider.

An async SDK client holds connections tied to the event loop that opened them, and
`chat()` runs each call in a fresh loop, so the shell keeps one client per running loop
and builds a new one when the loop changes.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import aiohttp
import pydantic

from streamagents.connectors.media import MediaStore
from streamagents.connectors.provider_files import ProviderFile, ProviderFileIndex
from streamagents.connectors.providers.admission import Admission, RateLimits, Ticket
from streamagents.connectors.providers.errors import (
    ConnectionFailed,
    MalformedResponse,
    ProviderError,
    RateLimited,
    RequestTimeout,
    error_for_status,
)
from streamagents.connectors.providers.file_uploads import FileUploads, UploadMedia
from streamagents.connectors.providers.neutral_request import MessageLike, ToolLike
from streamagents.connectors.providers.options import ModelOptions, checked
from streamagents.connectors.providers.retry import (
    RetryBudget,
    call_with_retries,
    parse_retry_after,
)
from streamagents.connectors.providers.token_estimate import (
    OutputMean,
    estimate_input_tokens,
    requested_output_tokens,
)
from streamagents.serde.chat import ChatResponse, RetryAttempt, ToolSpec
from streamagents.serde.messages import ChatMessage, MediaPart
from streamagents.serde.safe_text import scrub

__all__ = [
    "TRANSPORT_ERRORS",
    "ChatModel",
    "LoopBoundClient",
    "SDKChatModel",
    "failed_connection_beneath",
]

C = TypeVar("C")
T = TypeVar("T")
OptionsT = TypeVar("OptionsT", bound="ModelOptions")


class ChatModel(ABC):
    """A chat model reached through a provider SDK: messages (and tools) in, a response out."""

    provider: str = "abstract"

    @abstractmethod
    async def achat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Send one request and return the assistant's reply."""

    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Blocking form of `achat`, for code that has no event loop running (the client it
        opens in its own loop is closed before it returns)."""

        async def once() -> ChatResponse:
            try:
                return await self.achat(messages, tools, **options)
            finally:
                await self.aclose()

        return asyncio.run(once())

    def prepare(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Start what the first call would otherwise wait for (a worker process)."""

    async def warm(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Build, on the running loop, what the first call on it would build before
        sending (an SDK client), so that call does not wait for it."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Release the SDK client's connections."""


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
TRANSPORT_ERRORS = (
    OSError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    *_http_exception_types("TransportError"),
)
"""Errors of a connection that failed or dropped (the adapters map them to ConnectionFailed)."""
_BAD_BODIES = (json.JSONDecodeError, pydantic.ValidationError)


def failed_connection_beneath(error: BaseException) -> bool:
    """Whether a timeout an SDK raised stands for a connection that failed, not one that
    timed out: `openai`'s aiohttp transport reports a refused connection as `ConnectTimeout`."""
    cause = error.__cause__
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            return True
        cause = cause.__cause__
    return False


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


class SDKChatModel(ChatModel, Generic[C, OptionsT]):
    """A `ChatModel` over an async SDK client: build, send with retries, parse, map errors.

    Constructed with the model name, what the operator gives it, and the client options
    of `options_type` as keywords (validated by it: an unknown one is named).
    """

    options_type: ClassVar[type[ModelOptions]] = ModelOptions

    def __init__(
        self,
        model: str,
        *,
        media_store: MediaStore | None = None,
        generation: Mapping[str, Any] | None = None,
        limits: RateLimits | None = None,
        upload_media: UploadMedia | None = None,
        **options: Any,
    ) -> None:
        """`media_store`: where media parts given by store ref are read from; `generation`:
        generation options sent with every call; `limits`: what admission applies to this
        model's attempts in this process (a subtask's share of the spec's limits; None: the
        adaptive rate alone); `upload_media`: send media of its `min_bytes` or more to the
        provider's file API once (None: inline)."""
        given: Any = checked(self.options_type, options, "option")
        self.model = model
        self.options: OptionsT = self._with_api_key(given)
        self.media_store = media_store
        """Where store refs are resolved."""
        self.generation = dict(generation or {})
        self.limits = limits or RateLimits()
        self.upload_media = upload_media
        self.retry_budget = RetryBudget(self.options.retry_budget)
        self.admission: Admission | None = Admission(self.limits) if self.limits.active else None
        """Where every attempt waits for capacity; None when admission is off."""
        self._family = "gemini" if self.provider.startswith("gemini") else "openai"
        self._output_mean = OutputMean()
        self._rng = random.Random()
        self._client: LoopBoundClient[C] = LoopBoundClient(self._new_client)
        self.uploads = self._file_uploads()
        """Where media of `upload_media` size go to the provider's file API; None: inline."""

    def _file_uploads(self) -> FileUploads | None:
        """The uploads `upload_media` asks for; a model without a file API refuses it."""
        settings, store = self.upload_media, self.media_store
        if settings is None:
            return None
        endpoint = self._files_endpoint()
        if endpoint is None:
            raise ValueError(f"{type(self).__name__} has no file API; remove upload_media")
        if store is None:
            raise ValueError(
                "upload_media records its files beside the media store: pass media_store="
            )
        index = ProviderFileIndex(store.root, endpoint)
        return FileUploads(settings, index, store, self._references_file, self._upload_file)

    @property
    def api_key(self) -> str | None:
        """The API key in use (given, or from the environment)."""
        return self.options.api_key

    @property
    def base_url(self) -> str | None:
        """Where the API is served; None for the provider's default."""
        return self.options.base_url

    @property
    def timeout(self) -> float | None:
        """Seconds one attempt may take."""
        return self.options.timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    async def warm(self) -> None:
        """Build this loop's SDK client (its TLS context, its session) now."""
        self._client.get()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the settings only (a Flink function may carry the model); SDK clients stay."""
        state = self.__dict__.copy()
        del state["_client"], state["uploads"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client = LoopBoundClient(self._new_client)
        self.uploads = self._file_uploads()

    def build_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike] = (),
        *,
        files: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Any:
        """The request `achat` would send: this model's store, defaults and `options` applied;
        `files` maps the sha256 of media the provider holds as files to their references."""
        return self._to_request(messages, tools, {**self.generation, **options}, files or {})

    @abstractmethod
    def _with_api_key(self, options: OptionsT) -> OptionsT:
        """The options with the API key filled in from the environment; refuse a missing one."""

    @abstractmethod
    def _to_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike],
        options: dict[str, Any],
        files: Mapping[str, str],
    ) -> Any:
        """Call the wire module's `to_request`."""

    def _files_endpoint(self) -> str | None:
        """The name of the file API this model uploads to (family and base URL: files are
        shared by the models of one endpoint); None: it has none."""
        return None

    def _references_file(self, part: MediaPart) -> bool:
        """Whether the wire can refer to `part` as an uploaded file (its `references_file`)."""
        return False

    async def _upload_file(self, data: bytes, mime_type: str, filename: str) -> ProviderFile:
        """Upload media through the SDK's file API (`sdk_operation`) and return the file."""
        raise NotImplementedError(f"{type(self).__name__} has no file API")

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
    def _sdk_error(self, error: Exception) -> ProviderError | None:
        """Our error for one of the SDK's own exceptions, or None when it is not one."""

    @abstractmethod
    async def _close(self, client: C) -> None:
        """Release the SDK client's connections."""

    def _status_error(
        self, status: int | None, code: str | None, message: str, headers: Mapping[str, str]
    ) -> ProviderError:
        """The error for an HTTP error reply: status table, scrubbed message and code (a
        server may echo anything in either: every credential of the options goes), Retry-After."""
        secrets = self.options.secret_values()
        return error_for_status(
            status,
            scrub(message, secrets),
            provider=self.provider,
            code=None if code is None else scrub(code, secrets),
            retry_after=parse_retry_after(headers),
        )

    def _timed_out(self) -> RequestTimeout:
        """The error for an attempt that got no reply within `timeout`."""
        return RequestTimeout(f"no reply within {self.timeout} s", provider=self.provider)

    def _malformed(self, error: Exception) -> MalformedResponse:
        """The error for a 2xx reply whose body the SDK could not read."""
        return MalformedResponse(
            f"the reply body is not valid JSON for this API ({type(error).__name__})",
            provider=self.provider,
        )

    def _error_for(self, error: Exception) -> ProviderError | None:
        """Our error for an exception raised by the SDK call, or None to let it propagate."""
        mapped = self._sdk_error(error)
        if mapped is not None:
            return mapped
        if isinstance(error, _BAD_BODIES):
            return self._malformed(error)
        if isinstance(error, _TIMEOUTS):
            return self._timed_out()
        if isinstance(error, TRANSPORT_ERRORS):
            return ConnectionFailed(
                f"connection failed ({type(error).__name__})", provider=self.provider
            )
        return None

    async def achat(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike] = (),
        **options: Any,
    ) -> ChatResponse:
        """Build the request (raising before anything is sent), then send it with retries;
        with `upload_media`, upload the media it refers to as files first."""
        tokens = self.estimate_tokens(messages, tools, options)
        if self.uploads is None:
            return await self._answer(self.build_request(messages, tools, **options), tokens)

        async def send(files: Mapping[str, str]) -> ChatResponse:
            request = self.build_request(messages, tools, files=files, **options)
            return await self._answer(request, tokens)

        return await self.uploads.answer(messages, send)

    async def _answer(self, request: Any, tokens: float) -> ChatResponse:
        """Send a built request and return the reply (an adapter may add a step: a cache)."""
        return await self._call(request, tokens)

    def estimate_tokens(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike], options: dict[str, Any]
    ) -> float:
        """The tokens admission charges a call before it is sent (0 when no token limit is
        set): its input by `token_estimate`'s rules, plus its output cap or the mean output."""
        if self.admission is None or not self.admission.counts_tokens:
            return 0.0
        output = requested_output_tokens({**self.generation, **options})
        estimate = estimate_input_tokens(self._family, messages, tools)
        return estimate + (self._output_mean.value if output is None else output)

    async def _call(self, request: Any, tokens: float = 0.0) -> ChatResponse:
        """Send a built request with retries, each attempt admitted first, and parse the
        reply; `tokens` is the call's estimate (`estimate_tokens`)."""
        started = time.monotonic()
        admission = self.admission
        sent = 0

        async def attempt() -> ChatResponse:
            nonlocal sent
            ticket = None if admission is None else await admission.admit(tokens, sent > 0)
            sent += 1
            reply = await self._sent(ticket, lambda client: self._send(client, request))
            response = None
            try:
                response = self._parse(reply, (time.monotonic() - started) * 1000)
            finally:
                self._settle(ticket, response, None)
            return response

        retried: list[RetryAttempt] = []
        response = await call_with_retries(
            attempt,
            self.options.max_retries,
            self.options.retry,
            self.retry_budget,
            self._rng,
            retried,
            paced=admission is not None,
        )
        return response.model_copy(update={"retries": retried}) if retried else response

    async def sdk_operation(self, operation: Callable[[C], Awaitable[T]]) -> T:
        """Run an SDK call other than a chat call (a file upload) the way calls run: each
        attempt admitted (counted as a request, no tokens), errors mapped, retried."""
        admission = self.admission
        sent = 0

        async def attempt() -> T:
            nonlocal sent
            ticket = None if admission is None else await admission.admit(0.0, sent > 0)
            sent += 1
            result = await self._sent(ticket, operation)
            self._settle(ticket, None, None)
            return result

        return await call_with_retries(
            attempt,
            self.options.max_retries,
            self.options.retry,
            self.retry_budget,
            self._rng,
            paced=admission is not None,
        )

    async def _sent(self, ticket: Ticket | None, operation: Callable[[C], Awaitable[T]]) -> T:
        """One attempt's SDK operation; when it fails, its admission ticket is settled and
        the mapped `ProviderError` raised (an error no mapping knows, as it is). On success
        the caller settles the ticket, with the reply's usage when it has one."""
        failure: ProviderError | None = None
        try:
            return await operation(self._client.get())
        except asyncio.CancelledError:  # the run gave up: its slot must not stay taken
            self._settle(ticket, None, None)
            raise
        except Exception as error:
            failure = self._error_for(error)
            if failure is None:
                self._settle(ticket, None, None)
                raise
        self._settle(ticket, None, failure)
        raise failure  # outside the except block: the SDK error is not chained

    def _settle(
        self, ticket: Ticket | None, response: ChatResponse | None, failure: ProviderError | None
    ) -> None:
        """Tell admission how an attempt ended: a 429 pauses and slows it, a reply's usage
        corrects the token estimate; either way the attempt's slot is freed."""
        if ticket is None:
            return
        assert self.admission is not None
        if isinstance(failure, RateLimited):
            self.admission.limited(ticket, failure.retry_after)
            return
        used = None
        if response is not None and (response.usage.input_tokens or response.usage.output_tokens):
            used = response.usage.total_tokens
            self._output_mean.observe(response.usage.output_tokens)
        self.admission.settle(ticket, used)

    async def aclose(self) -> None:
        """Close the SDK client of the running loop, if any."""
        client = self._client.take_current()
        if client is not None:
            await self._close(client)
