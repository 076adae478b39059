"""`GeminiChatModel`: the Gemini wire sent with a `google-genai` client (Gemini API or Vertex)."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from streamagents.connectors.provider_files import ProviderFile
from streamagents.connectors.providers.base import SDKChatModel
from streamagents.connectors.providers.errors import BadRequest, MalformedResponse, ProviderError
from streamagents.connectors.providers.gemini._aiohttp_session import (
    proxied_session,
    shared_tls_context,
)
from streamagents.connectors.providers.gemini._context_cache import (
    CacheCreated,
    ContextCache,
    ContextCacheSettings,
)
from streamagents.connectors.providers.gemini._request import send_generate_content
from streamagents.connectors.providers.gemini.wire import (
    PROVIDER,
    GeminiRequest,
    from_response,
    references_file,
    to_request,
)
from streamagents.connectors.providers.neutral_request import MessageLike, ToolLike
from streamagents.connectors.providers.options import GeminiOptions
from streamagents.serde.chat import ChatResponse
from streamagents.serde.messages import MediaPart

__all__ = ["GeminiChatModel", "sdk_http_options"]

GEMINI_API_ENDPOINT = "https://generativelanguage.googleapis.com/"
"""Where the SDK sends Gemini API requests when no base_url is given."""
_READ_BUFSIZE = 1 << 22
"""The read buffer google-genai gives the aiohttp sessions it makes (4 MiB)."""
_FIRST_POLL_S = 0.2
_LONGEST_POLL_S = 5.0
_LONGEST_PROCESSING_S = 600.0
"""How often, and how long at most, an uploaded file still PROCESSING is asked for again."""


def sdk_http_options(
    options: GeminiOptions, session: aiohttp.ClientSession | None = None
) -> types.HttpOptions:
    """The google-genai client's HTTP options: endpoint, timeout, one attempt, transport
    (and the aiohttp session to send with, when given, whose requests then verify servers
    with the process's `shared_tls_context`)."""
    if options.transport == "httpx":
        # A transport of its own is how the SDK is told to use httpx rather than aiohttp.
        client_args: dict[str, Any] | None = {"transport": httpx2.AsyncHTTPTransport()}
    else:
        client_args = None if session is None else {"ssl": shared_tls_context()}
    return types.HttpOptions(
        base_url=options.base_url,
        api_version=options.api_version,
        timeout=None if options.timeout is None else int(options.timeout * 1000),
        # One attempt: our shell retries. Set rather than None: with no retry options the
        # SDK retries on its own (its aiohttp path sleeps 1-10 s and tries a failed
        # connection again; the interactions client retries too).
        retry_options=types.HttpRetryOptions(attempts=1),
        async_client_args=client_args,
        aiohttp_client=session,
    )


class GeminiChatModel(SDKChatModel[genai.Client, GeminiOptions]):
    """A Gemini model (Gemini API or Vertex AI) behind the neutral `ChatModel` interface."""

    provider = PROVIDER
    options_type = GeminiOptions

    def __init__(
        self,
        model: str,
        *,
        builtin_tools: Sequence[str] = (),
        context_cache: ContextCacheSettings | None = None,
        **options: Any,
    ) -> None:
        """`builtin_tools`: the built-in server-side tools to enable (google_search,
        url_context, code_execution); `context_cache`: cache the system instruction, tools
        and agent documents on the server (None: off); `options` as `SDKChatModel`'s."""
        super().__init__(model, **options)
        self.builtin_tools = tuple(builtin_tools)
        self.context_cache = (
            None
            if context_cache is None
            else ContextCache(context_cache, self._create_cache, self._delete_cache)
        )

    def _with_api_key(self, options: GeminiOptions) -> GeminiOptions:
        key = (
            options.api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        )
        if not key and not options.vertexai:
            raise ValueError(
                "GeminiChatModel needs an API key: pass api_key= or set GEMINI_API_KEY "
                "(or GOOGLE_API_KEY); Vertex AI (vertexai=True) uses Google credentials instead"
            )
        return options.model_copy(update={"api_key": key})

    def _new_client(self) -> genai.Client:
        """A client for the running loop. On the Gemini API over aiohttp it sends with a
        session of ours that looked up the environment's proxy once (`proxied_session`),
        where the SDK's own would look it up in a worker thread for every call; Vertex AI
        keeps the SDK's session, which carries its Google credentials."""
        options = self.options
        if options.vertexai:
            return genai.Client(
                vertexai=True,
                api_key=options.api_key if not (options.project or options.location) else None,
                project=options.project,
                location=options.location,
                http_options=sdk_http_options(options),
            )
        session = None
        if options.transport == "aiohttp":
            session = proxied_session(options.base_url or GEMINI_API_ENDPOINT, _READ_BUFSIZE)
        return genai.Client(
            api_key=options.api_key, http_options=sdk_http_options(options, session)
        )

    def _to_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike],
        options: dict[str, Any],
        files: Mapping[str, str],
    ) -> GeminiRequest:
        return to_request(
            messages,
            tools,
            options,
            store=self.media_store,
            legacy_tool_media=self.options.legacy_tool_media,
            builtin_tools=self.builtin_tools,
            vertexai=self.options.vertexai,
            files=files,
        )

    async def _answer(self, request: GeminiRequest, tokens: float) -> ChatResponse:
        """Send the request, through the context cache when one is configured."""
        if self.context_cache is None:
            return await self._call(request, tokens)

        async def call(request: GeminiRequest) -> ChatResponse:
            return await self._call(request, tokens)

        return await self.context_cache.answer(request, call)

    def _files_endpoint(self) -> str | None:
        """The Gemini API's Files service at `base_url` (Vertex AI has none)."""
        if self.options.vertexai:
            return None
        return f"gemini-files {self.options.base_url or GEMINI_API_ENDPOINT}"

    def _references_file(self, part: MediaPart) -> bool:
        return references_file(part)

    async def _upload_file(self, data: bytes, mime_type: str, filename: str) -> ProviderFile:
        """Upload through `files.upload` (the resumable protocol), then wait until the file
        is ACTIVE (`files.get`), as a request may refer to it only then."""
        config = types.UploadFileConfig(mime_type=mime_type, display_name=filename)

        async def upload(client: genai.Client) -> types.File:
            return await client.aio.files.upload(file=io.BytesIO(data), config=config)

        file = await self.sdk_operation(upload)
        waited, pause = 0.0, _FIRST_POLL_S
        while file.state == types.FileState.PROCESSING and waited < _LONGEST_PROCESSING_S:
            await asyncio.sleep(pause)
            waited, pause = waited + pause, min(pause * 2, _LONGEST_POLL_S)
            name = file.name or ""

            async def get(client: genai.Client, name: str = name) -> types.File:
                return await client.aio.files.get(name=name)

            file = await self.sdk_operation(get)
        if file.state != types.FileState.ACTIVE or not file.uri or not file.name:
            state = file.state.value if file.state is not None else "no state"
            raise BadRequest(
                f"the Files API did not make the uploaded {mime_type} file usable ({state})",
                provider=self.provider,
            )
        expires = file.expiration_time
        return ProviderFile(
            reference=file.uri,
            name=file.name,
            mime_type=mime_type,
            size_bytes=len(data),
            expires_at=None if expires is None else expires.timestamp(),
        )

    async def _create_cache(
        self, request: GeminiRequest, settings: ContextCacheSettings
    ) -> CacheCreated:
        """Create a context cache of `request`'s prefix with the SDK's caches client."""
        config = request.cache_config(settings.ttl_s, settings.display_name)
        try:
            cached = await self._client.get().aio.caches.create(model=self.model, config=config)
        except Exception as error:
            raise self._error_for(error) or error from None
        if not cached.name:
            raise MalformedResponse("the created cache has no name", provider=self.provider)
        usage = cached.usage_metadata
        tokens = (usage.total_token_count if usage is not None else None) or 0
        return CacheCreated(name=cached.name, tokens=tokens)

    async def _delete_cache(self, name: str) -> None:
        """Delete a context cache."""
        await self._client.get().aio.caches.delete(name=name)

    async def _send(self, client: genai.Client, request: GeminiRequest) -> Any:
        return await send_generate_content(client, self.model, request)

    def _parse(self, reply: Any, latency_ms: float) -> ChatResponse:
        return from_response(reply, model=self.model, latency_ms=latency_ms)

    def _sdk_error(self, error: Exception) -> ProviderError | None:
        if not isinstance(error, genai_errors.APIError):
            return None
        headers = dict(error.response.headers) if error.response is not None else {}
        status = error.code if isinstance(error.code, int) else None
        message = str(error.message or error.details or "no message")
        return self._status_error(status, error.status, message, headers)

    async def _close(self, client: genai.Client) -> None:
        await client.aio.aclose()
        session = client.aio._api_client._http_options.aiohttp_client
        if session is not None:  # ours: the SDK leaves a session it was given open
            await session.close()
