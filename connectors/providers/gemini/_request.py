"""`send_generate_content`: one `generateContent` call through google-genai's request layer.

`client.aio.models.generate_content` takes typed parameters, runs them through the SDK's
pydantic models and converters, and builds a typed `GenerateContentResponse` from the
reply. Here the REST JSON our wire built (`GeminiRequest.body()`) goes straight to the
SDK's HTTP layer (`_api_client.async_request`: endpoint, headers, auth, timeout,
`errors.APIError` for an error status), and the reply comes back as its JSON object, read
once by `from_response`. Only generation options the wire has no plain rule for
(`GeminiRequest.typed_options`) still go through the SDK's config converter.
"""

from __future__ import annotations

import json
from typing import Any

from google import genai
from google.genai import _common, _transformers, models

from streamagents.connectors.providers.gemini.wire import GeminiRequest

__all__ = ["send_generate_content"]


def _typed_fields(api_client: Any, config: Any) -> dict[str, Any]:
    """The body fields the SDK's converter makes of the typed generation options:
    `generationConfig` entries under that key, body fields (safety settings, ...) as they are."""
    convert = (
        models._GenerateContentConfig_to_vertex
        if api_client.vertexai
        else models._GenerateContentConfig_to_mldev
    )
    body: dict[str, Any] = {}
    generation = convert(api_client, config.model_dump(exclude_none=True), body)
    body["generationConfig"] = generation
    return _common.encode_unserializable_types(_common.convert_to_dict(body))


async def send_generate_content(client: genai.Client, model: str, request: GeminiRequest) -> Any:
    """POST `models/{model}:generateContent` with the request's JSON; return the reply's
    JSON (a dict)."""
    api_client = client.aio._api_client
    body = request.body()
    if request.cached_content is not None:  # a full resource name, as the SDK completes it
        body["cachedContent"] = _transformers.t_cached_content_name(
            api_client, request.cached_content
        )
    http_options = None
    typed = request.typed_options
    if typed is not None:
        fields = _typed_fields(api_client, typed)
        body["generationConfig"].update(fields.pop("generationConfig"))
        body.update(fields)
        http_options = typed.http_options
    path = f"{_transformers.t_model(api_client, model)}:generateContent"
    reply = await api_client.async_request("post", path, body, http_options)
    return json.loads(reply.body) if reply.body else {}
