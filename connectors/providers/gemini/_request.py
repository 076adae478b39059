"""`send_generate_content`: one `generateContent` call through google-genai's request layer.

`client.aio.models.generate_content` wraps the call in automatic-function-calling checks
and builds a typed `GenerateContentResponse` from the reply, which `wire.from_response`
then reads field by field. Here the request goes through the SDK's own converters and
HTTP layer (`_api_client.async_request`: headers, auth, timeout, `errors.APIError` for an
error status) and the reply comes back as its JSON object, read once by `from_response`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from google import genai
from google.genai import _common, models, types

__all__ = ["send_generate_content"]


async def send_generate_content(
    client: genai.Client,
    model: str,
    contents: list[types.Content],
    config: types.GenerateContentConfig,
) -> Any:
    """POST `models/{model}:generateContent` and return the reply's JSON (a dict)."""
    api_client = client.aio._api_client
    # The converters look each field up by name; on a pydantic model every lookup walks all
    # of its fields (about 40 for the config), on a dict it is one hash: give them dicts.
    parameters = {
        "model": model,
        "contents": [content.model_dump(exclude_none=True) for content in contents],
        "config": config.model_dump(exclude_none=True),
    }
    if api_client.vertexai:
        request = models._GenerateContentParameters_to_vertex(
            api_client, parameters, None, parameters
        )
    else:
        request = models._GenerateContentParameters_to_mldev(
            api_client, parameters, None, parameters
        )
    url = request.get("_url")
    path = "{model}:generateContent".format_map(url) if url else "{model}:generateContent"
    query = request.get("_query")
    if query:
        path = f"{path}?{urlencode(query)}"
    request.pop("config", None)
    body = _common.encode_unserializable_types(_common.convert_to_dict(request))
    reply = await api_client.async_request("post", path, body, config.http_options)
    return json.loads(reply.body) if reply.body else {}
