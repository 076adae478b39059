"""`GeminiInteractionsModel`: the Interactions wire sent through a `google-genai` client.

The body is our own JSON (`interactions_wire.to_request`), sent with the SDK's request
method (`async_request`: its transport, auth headers, timeout and error classes, without
its typed-parameter transforms). A continuation the server no longer holds (HTTP 404:
expired or deleted) is sent once more with the whole conversation.

With `stream`, the same body goes through the SDK's interactions client
(`client.aio.interactions.create`), whose event-stream reader understands the API's
`event:` lines (the request method's does not), and the events are assembled into the
interaction; a stream that ends early is resumed (`interactions.get(id, stream=True,
last_event_id=...)`, i.e. `GET interactions/{id}?stream=true&last_event_id=...`) rather
than started again. The client makes one attempt per request (retries are ours).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from google import genai
from google.genai import _interactions as interactions_errors

from streamagents.connectors.providers.base import TRANSPORT_ERRORS
from streamagents.connectors.providers.errors import BadRequest, ConnectionFailed, ProviderError
from streamagents.connectors.providers.gemini._model import GeminiChatModel, sdk_http_options
from streamagents.connectors.providers.gemini.interactions_wire import (
    PROVIDER,
    InteractionsRequest,
    StreamAssembler,
    from_response,
    to_request,
)
from streamagents.connectors.providers.neutral_request import MessageLike, ToolLike
from streamagents.connectors.providers.options import GeminiInteractionsOptions, GeminiOptions
from streamagents.serde.chat import ChatResponse

__all__ = ["GeminiInteractionsModel"]


class _StoredInteractionGone(BadRequest):
    """HTTP 404 to a request continuing a stored interaction: it expired or was deleted."""


@dataclasses.dataclass(frozen=True)
class _Reply:
    """An interaction as received, and the stored interaction its request continued."""

    interaction: Any
    continued_from: str | None


class GeminiInteractionsModel(GeminiChatModel):
    """A Gemini model behind the Interactions API (Gemini API), with stored continuation.

    `achat(..., previous_interaction_id=id)` continues the stored interaction `id`: only
    the messages after the assistant message that came with it are sent."""

    provider = PROVIDER
    options_type = GeminiInteractionsOptions
    options: GeminiInteractionsOptions

    def _with_api_key(self, options: GeminiOptions) -> GeminiOptions:
        if options.vertexai:
            raise ValueError("the gemini-interactions wire serves the Gemini API, not Vertex AI")
        if options.legacy_tool_media:
            raise ValueError(
                "legacy_tool_media applies to the gemini wire; the Interactions API carries "
                "tool-result media inside the function_result step"
            )
        checked = super()._with_api_key(options)
        return checked.model_copy(update={"api_version": checked.api_version or "v1beta"})

    def _files_endpoint(self) -> str | None:
        """None: `upload_media` applies to the gemini wire, not to this one."""
        return None

    def _to_request(
        self,
        messages: Sequence[MessageLike],
        tools: Sequence[ToolLike],
        options: dict[str, Any],
        files: Mapping[str, str],  # always empty: this wire has no `upload_media`
    ) -> InteractionsRequest:
        if not (self.options.store and self.options.continue_stored):
            options.pop("previous_interaction_id", None)
        return to_request(
            messages,
            tools,
            options,
            model=self.model,
            store=self.media_store,
            stored=self.options.store,
            stream=self.options.stream,
        )

    async def _send(self, client: genai.Client, request: InteractionsRequest) -> _Reply:
        try:
            return await self._send_once(client, request)
        except Exception as error:
            mapped = self._sdk_error(error)
            if request.continued_from is None or mapped is None or mapped.status != 404:
                raise
        raise _StoredInteractionGone(
            f"the stored interaction {request.continued_from} is gone ({mapped})",
            provider=self.provider,
            status=404,
            code=mapped.code,
        )

    async def _send_once(self, client: genai.Client, request: InteractionsRequest) -> _Reply:
        api = client.aio._api_client
        if not self.options.stream:
            reply = await api.async_request("post", "interactions", request.body)
            return _Reply(json.loads(reply.body), request.continued_from)
        stream = StreamAssembler()
        body = {**request.body, "automatic_continuation": False}
        await self._read(await client.aio.interactions.create(**body), stream)
        resumed_from, resumes = None, 0
        while not stream.completed:
            if stream.interaction_id is None or stream.last_event_id is None:
                raise ConnectionFailed(
                    "the stream ended before the interaction was created", provider=self.provider
                )
            resumes = resumes + 1 if stream.last_event_id == resumed_from else 1
            resumed_from = stream.last_event_id
            if resumes > self.options.max_stream_resumes:
                raise ConnectionFailed(
                    f"the stream of interaction {stream.interaction_id} ended early "
                    f"{resumes} times in a row without a new event",
                    provider=self.provider,
                )
            resumed = await client.aio.interactions.get(
                stream.interaction_id, stream=True, last_event_id=stream.last_event_id
            )
            await self._read(resumed, stream)
        return _Reply(stream.interaction(), request.continued_from)

    @staticmethod
    async def _read(events: Any, stream: StreamAssembler) -> None:
        """Feed one read's events to `stream`; a read that breaks off after the
        interaction was created just ends (the caller resumes)."""
        try:
            async for event in events:
                stream.add(event.model_dump(mode="json", exclude_none=True))
        except (*TRANSPORT_ERRORS, interactions_errors.APIConnectionError):
            if stream.interaction_id is None:
                raise

    def _new_client(self) -> genai.Client:
        options = self.options
        return genai.Client(
            api_key=options.api_key,
            http_options=sdk_http_options(options),
        )

    def _sdk_error(self, error: Exception) -> ProviderError | None:
        """Also map the interactions client's own errors (streaming)."""
        if isinstance(error, interactions_errors.APIStatusError):
            body = error.body if isinstance(error.body, dict) else {}
            detail = body.get("error") if isinstance(body.get("error"), dict) else {}
            return self._status_error(
                error.status_code,
                None if detail.get("status") is None else str(detail["status"]),
                str(detail.get("message") or error.message or "no message"),
                dict(error.response.headers),
            )
        if isinstance(error, interactions_errors.APITimeoutError):
            return self._timed_out()
        if isinstance(error, interactions_errors.APIConnectionError):
            return ConnectionFailed("connection failed", provider=self.provider)
        if isinstance(error, interactions_errors.APIResponseValidationError):
            return self._malformed(error)
        return super()._sdk_error(error)

    def _parse(self, reply: _Reply, latency_ms: float) -> ChatResponse:
        return from_response(
            reply.interaction,
            model=self.model,
            stored=self.options.store,
            continued_from=reply.continued_from,
            latency_ms=latency_ms,
        )

    async def achat(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike] = (), **options: Any
    ) -> ChatResponse:
        """Send one request; a continuation of an interaction the server no longer holds
        is sent once more with the whole conversation (`continuation_fallback` says so)."""
        try:
            return await super().achat(messages, tools, **options)
        except _StoredInteractionGone as error:
            reason = f"{error.message}; sent the whole conversation"
        options.pop("previous_interaction_id")
        response = await super().achat(messages, tools, **options)
        return response.model_copy(update={"continuation_fallback": reason})
