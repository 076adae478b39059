"""Media encodings the wires share: base64 text, `data:` URLs and a filename for a part."""

from __future__ import annotations

import base64
import mimetypes

from streamagents.connectors.providers.neutral_request import inline_bytes
from streamagents.serde.messages import MediaPart

__all__ = ["b64", "data_url", "filename_for"]


def b64(data: bytes) -> str:
    """Standard base64 text of `data`."""
    return base64.b64encode(data).decode("ascii")


def data_url(part: MediaPart) -> str:
    """The part as a `data:` URL (inline parts) or its own URL."""
    if part.url is not None:
        return part.url
    return f"data:{part.mime_type};base64,{b64(inline_bytes(part) or b'')}"


def filename_for(part: MediaPart) -> str:
    """A filename for wires that need one: `metadata["filename"]`, the URL's last
    segment, or "document" with the mime type's usual extension."""
    given = part.metadata.get("filename")
    if isinstance(given, str) and given:
        return given
    if part.url is not None:
        tail = part.url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
        if tail:
            return tail
    extension = mimetypes.guess_extension(part.mime_type.split(";", 1)[0]) or ""
    return f"{part.kind}{extension}"
