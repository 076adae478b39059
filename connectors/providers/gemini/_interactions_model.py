"""`GeminiInteractionsModel`: the Interactions wire sent through a `google-genai` client.

The body is our own JSON (`interactions_wire.to_request`), sent with the SDK's request
method (`async_request`: its transport, auth headers, timeout and error classes, without
its typed-parameter transforms). A continuation the server no longer holds (HTTP 404:
expired or deleted) is sent once more with the whole conversation.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from google import genai

from streamagents.connectors.providers._errors import BadRequest
from streamagents.connectors.providers._neutral_request import MessageLike, ToolLike
from streamagents.connectors.providers.gemini._model import GeminiChatModel, GeminiOptions
from streamagents.connectors.providers.gemini.interactions_wire import (
    PROVIDER,
    InteractionsRequest,
    from_response,
    to_request,
)
from streamagents.serde.chat import ChatResponse

__all__ = ["GeminiInteractionsModel", "GeminiInteractionsOptions"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GeminiInteractionsOptions(GeminiOptions):
    """The Gemini options plus the Interactions API's own (storing and continuing)."""

    store: bool = True
    """Ask the server to store each interaction (the body's `store`)."""
    continue_stored: bool = True
    """With `store`, send only the steps after the stored interaction a request names
    (`previous_interaction_id`) instead of the whole conversation."""


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
        return dataclasses.replace(checked, api_version=checked.api_version or "v1beta")

    def _to_request(
        self, messages: Sequence[MessageLike], tools: Sequence[ToolLike], options: dict[str, Any]
    ) -> InteractionsRequest:
        if not (self.options.store and self.options.continue_stored):
            options.pop("previous_interaction_id", None)
        return to_request(
            messages,
            tools,
            options,
            model=self.model,
            store=self.options.media_store,
            stored=self.options.store,
        )

    async def _send(self, client: genai.Client, request: InteractionsRequest) -> _Reply:
        reply = await client.aio._api_client.async_request("post", "interactions", request.body)
        return _Reply(json.loads(reply.body), request.continued_from)

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
        except BadRequest as error:
            previous = options.pop("previous_interaction_id", None)
            if error.status != 404 or not previous:
                raise
            reason = (
                f"the stored interaction {previous} is gone ({error}); sent the whole conversation"
            )
        response = await super().achat(messages, tools, **options)
        return response.model_copy(update={"continuation_fallback": reason})
