"""An MCP tool result as tool-result content: text as text, images and audio as media parts
stored by content hash, embedded resources as document (or other media) parts or text,
resource links as text with their URI; `isError` as an `McpToolError`.

Media go into the media store here (`MediaStore.put`), so the result carries refs: the
history in keyed state stays small, and each wire resolves the refs when it builds a
request, through its own media-in-tool-results path. A tool server is untrusted: the size
of a whole result, media included, is checked against the agent's
`max_tool_result_bytes` before anything is decoded or stored.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from streamagents.connectors.media import MediaStore
from streamagents.serde.messages import (
    MEDIA_PART_CLASSES,
    TextPart,
    decode_base64,
    media_kind_for_mime,
)
from streamagents.serde.safe_text import clip

__all__ = ["McpResultTooLarge", "McpToolError", "result_parts"]

_MAX_ERROR_CHARS = 2000


class McpToolError(Exception):
    """A result the server flagged `isError`: its text is what the model reads."""


class McpResultTooLarge(ValueError):
    """A result whose text and media together are over `max_tool_result_bytes`."""


def result_parts(result: Any, store: MediaStore, max_bytes: int | None = None) -> list[Any]:
    """The parts of a `CallToolResult`, in order; raises `McpToolError` for an `isError`
    result, `McpResultTooLarge` for one over `max_bytes` (checked before any media is
    decoded or stored) and `ValueError` for content that is not what MCP promises (bad
    base64)."""
    if not isinstance(result, types.CallToolResult):
        raise ValueError(f"the server answered a {type(result).__name__}, not a tool result")
    if max_bytes is not None and not result.is_error:
        size = sum(_size(block) for block in result.content)
        if size > max_bytes:
            raise McpResultTooLarge(
                f"the tool returned about {size} bytes (media included), more than "
                f"max_tool_result_bytes={max_bytes}; nothing of it was kept"
            )
    if result.is_error:
        text = " ".join(b.text for b in result.content if isinstance(b, types.TextContent))
        raise McpToolError(clip(text or "the tool reported an error", _MAX_ERROR_CHARS))
    parts = [_part(block, store) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(TextPart(text=json.dumps(result.structured_content, ensure_ascii=False)))
    return parts or [TextPart(text="")]


def _size(block: Any) -> int:
    """What a content block will weigh as a part: its text's UTF-8 bytes, or its media's
    bytes as their base64 length says (without decoding them)."""
    if isinstance(block, types.TextContent):
        return len(block.text.encode("utf-8", "surrogatepass"))
    if isinstance(block, types.ImageContent | types.AudioContent):
        return len(block.data) * 3 // 4
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return len(resource.text.encode("utf-8", "surrogatepass"))
        return len(resource.blob) * 3 // 4
    return 0


def _part(block: Any, store: MediaStore) -> Any:
    """One content block as a part."""
    if isinstance(block, types.TextContent):
        return TextPart(text=block.text)
    if isinstance(block, types.ImageContent | types.AudioContent):
        return _media(decode_base64(block.data, f"{block.type}.data"), block.mime_type, store)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return TextPart(text=resource.text)
        data = decode_base64(resource.blob, "resource.blob")
        return _media(data, resource.mime_type or "application/octet-stream", store, resource.uri)
    if isinstance(block, types.ResourceLink):
        described = f" ({block.description})" if block.description else ""
        kind = f", {block.mime_type}" if block.mime_type else ""
        return TextPart(text=f"resource link {block.name}{kind}: {block.uri}{described}")
    return TextPart(text=f"[MCP content of type {getattr(block, 'type', '?')!r} not supported]")


def _media(data: bytes, mime_type: str, store: MediaStore, uri: str | None = None) -> Any:
    """Media bytes as a part of their kind holding a store ref; text saying so when no
    part kind takes the mime type."""
    kind = media_kind_for_mime(mime_type)
    if kind is None:
        where = f" {uri}" if uri else ""
        return TextPart(
            text=f"[resource{where} ({mime_type}, {len(data)} bytes) not sent: no media part "
            "kind takes this mime type]"
        )
    return MEDIA_PART_CLASSES[kind](mime_type=mime_type, ref=store.put(data, mime_type))
