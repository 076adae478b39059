"""The OpenAI models: each OpenAI wire sent through an `openai.AsyncOpenAI` client (retries off).

The wire modules build the request JSON themselves, so it is posted with the client's
`request` (the SDK's own HTTP path and errors) rather than `chat.completions.create` /
`responses.create`, whose typed-parameter transform walks every message again (about a
third of the SDK's cost per call), and the reply is read from its JSON once. The client
goes through the SDK's aiohttp transport unless `transport="httpx"` is given: about half
the CPU per call of its default httpx client.

`OpenAIModel` holds what both wires share (options, client, the SDK's exceptions);
`OpenAIChatModel` and `OpenAIResponsesModel` each name their wire and the SDK call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import openai
from openai._models import FinalRequestOptions

from streamagents.connectors.provider_files import ProviderFile
from streamagents.connectors.providers.base import (
    SDKChatModel,
    failed_connection_beneath,
)
from streamagents.connectors.providers.errors import ConnectionFailed, ProviderError
from streamagents.connectors.providers.neutral_request import MessageLike, ToolLike
from streamagents.connectors.providers.openai import chat_wire, responses_wire
from streamagents.connectors.providers.options import OpenAIOptions
from streamagents.serde.chat import ChatResponse
from streamagents.serde.messages import MediaPart

__all__ = ["OpenAIChatModel", "OpenAIModel", "OpenAIResponsesModel"]

OPENAI_API_ENDPOINT = "https://api.openai.com/v1"
"""Where the SDK sends requests when no base_url is given."""
_POST_OPTIONS: dict[str, FinalRequestOptions] = {}
"""The request options of a POST to each path, without its body (see `OpenAIModel._post`)."""


class OpenAIModel(SDKChatModel[openai.AsyncOpenAI, OpenAIOptions]):
    """An OpenAI (or OpenAI-compatible: vLLM, Ollama, Azure) model reached with `openai`."""

    provider = "openai"
    options_type = OpenAIOptions

    def _with_api_key(self, options: OpenAIOptions) -> OpenAIOptions:
        key = options.api_key or os.environ.get("OPENAI_API_KEY")
        if not key and options.base_url is None:
            raise ValueError(
                f"{type(self).__name__} needs an API key: pass api_key= or set OPENAI_API_KEY "
                "(a server given by base_url may accept any key)"
            )
        return options.model_copy(update={"api_key": key or "unused"})

    def _new_client(self) -> openai.AsyncOpenAI:
        options = self.options
        return openai.AsyncOpenAI(
            api_key=options.api_key,
            base_url=options.base_url,
            organization=options.organization,
            timeout=options.timeout,
            max_retries=0,
            default_headers=dict(options.default_headers or {}) or None,
            http_client=openai.DefaultAioHttpClient() if options.transport == "aiohttp" else None,
        )

    def _sdk_error(self, error: Exception) -> ProviderError | None:
        if isinstance(error, openai.APIStatusError):
            body = error.body
            detail = body if isinstance(body, dict) else {}
            raw = detail.get("message") or (body if isinstance(body, str) else None) or "no message"
            code = detail.get("code") or detail.get("type")
            return self._status_error(
                error.status_code,
                None if code is None else str(code),
                str(raw),
                dict(error.response.headers),
            )
        if isinstance(error, openai.APITimeoutError) and not failed_connection_beneath(error):
            return self._timed_out()
        if isinstance(error, openai.APIConnectionError):
            return ConnectionFailed("connection failed", provider=self.provider)
        if isinstance(error, openai.APIResponseValidationError):
            return self._malformed(error)
        return None

    async def _post(self, client: openai.AsyncOpenAI, path: str, request: dict[str, Any]) -> Any:
        """POST the wire's JSON as it is, through the SDK's own request path (headers,
        timeout, `APIStatusError` for an error status) but without its typed-parameter
        transform and reply models: the reply comes back as its JSON, parsed once.

        `client.post` would build its request options with `FinalRequestOptions.construct`,
        which deep-copies every default (about 0.1-0.2 ms a call); they are built once per
        path here and copied shallowly, as the SDK's `request` itself copies them."""
        template = _POST_OPTIONS.get(path)
        if template is None:
            template = _POST_OPTIONS.setdefault(
                path, FinalRequestOptions.construct(method="post", url=path)
            )
        options = template.model_copy(update={"json_data": {"model": self.model, **request}})
        return await client.request(object, options)

    async def _close(self, client: openai.AsyncOpenAI) -> None:
        await client.close()

    def _files_endpoint(self) -> str | None:
        """OpenAI's Files API at `base_url` (both wires use the same files)."""
        return f"openai-files {self.options.base_url or OPENAI_API_ENDPOINT}"

    async def _upload_file(self, data: bytes, mime_type: str, filename: str) -> ProviderFile:
        """Upload through `files.create`: images with purpose `vision`, documents with
        `user_data` (the purposes OpenAI's guides give for model inputs)."""
        purpose: Any = "vision" if mime_type.startswith("image/") else "user_data"

        async def create(client: openai.AsyncOpenAI) -> Any:
            return await client.files.create(file=(filename, data, mime_type), purpose=purpose)

        file = await self.sdk_operation(create)
        expires = getattr(file, "expires_at", None)
        return ProviderFile(
            reference=file.id,
            name=file.id,
            mime_type=mime_type,
            size_bytes=len(data),
            expires_at=None if expires is None else float(expires),
        )


class OpenAIChatModel(OpenAIModel):
    """A model behind the Chat Completions API (OpenAI, or a compatible server by base_url)."""

    provider = chat_wire.PROVIDER

    def _to_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike],
        options: dict[str, Any],
        files: Mapping[str, str],
    ) -> dict[str, Any]:
        return chat_wire.to_request(messages, tools, options, store=self.media_store, files=files)

    def _references_file(self, part: MediaPart) -> bool:
        return chat_wire.references_file(part)

    async def _send(self, client: openai.AsyncOpenAI, request: dict[str, Any]) -> Any:
        return await self._post(client, "/chat/completions", request)

    def _parse(self, reply: Any, latency_ms: float) -> ChatResponse:
        return chat_wire.from_response(reply, model=self.model, latency_ms=latency_ms)


class OpenAIResponsesModel(OpenAIModel):
    """A model behind the OpenAI Responses API."""

    provider = responses_wire.PROVIDER

    def _to_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike],
        options: dict[str, Any],
        files: Mapping[str, str],
    ) -> dict[str, Any]:
        return responses_wire.to_request(
            messages, tools, options, store=self.media_store, files=files
        )

    def _references_file(self, part: MediaPart) -> bool:
        return responses_wire.references_file(part)

    async def _send(self, client: openai.AsyncOpenAI, request: dict[str, Any]) -> Any:
        return await self._post(client, "/responses", request)

    def _parse(self, reply: Any, latency_ms: float) -> ChatResponse:
        return responses_wire.from_response(reply, model=self.model, latency_ms=latency_ms)
