"""MCP tool results as parts (`result_parts`), built with the `mcp` SDK's own content types:
content that breaks MCP's promises (bad base64) and media of a type no part kind takes."""

from __future__ import annotations

import base64
from pathlib import Path

import mcp_types as types
import pytest

from streamagents.connectors.mcp_content import result_parts
from streamagents.connectors.media import MediaStore
from streamagents.serde.messages import TextPart

SECRET_PIXELS = b"\x89PNG\r\n\x1a\n" + b"private-pixels-of-a-badge" * 8
SENT = base64.b64encode(SECRET_PIXELS).decode()


@pytest.fixture
def store(tmp_path: Path) -> MediaStore:
    return MediaStore(str(tmp_path / "media"))


def stored_files(store: MediaStore) -> list[Path]:
    return [p for p in Path(store.root).rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    ("block", "field"),
    [
        (types.ImageContent(type="image", data=SENT + "!!", mime_type="image/png"), "image.data"),
        (types.AudioContent(type="audio", data="%" + SENT, mime_type="audio/wav"), "audio.data"),
        (
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="docs://badge.png", mime_type="image/png", blob=SENT[:-3]
                ),
            ),
            "resource.blob",
        ),
    ],
)
def test_media_with_invalid_base64_is_refused_naming_the_field_and_never_the_data(
    store: MediaStore, block: types.ContentBlock, field: str
) -> None:
    result = types.CallToolResult(content=[types.TextContent(type="text", text="ok"), block])
    with pytest.raises(ValueError) as refused:
        result_parts(result, store)
    message = str(refused.value)
    assert message.startswith(f"{field}: malformed base64")
    assert SENT[:12] not in message and SENT[-12:-3] not in message
    assert stored_files(store) == []


@pytest.mark.parametrize(
    ("block", "named"),
    [
        (
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="files://logs.zip", mime_type="application/zip", blob=SENT
                ),
            ),
            f"[resource files://logs.zip (application/zip, {len(SECRET_PIXELS)} bytes) not sent",
        ),
        (
            types.ImageContent(type="image", data=SENT, mime_type="application/octet-stream"),
            f"[resource (application/octet-stream, {len(SECRET_PIXELS)} bytes) not sent",
        ),
    ],
)
def test_media_of_a_type_no_part_kind_takes_become_a_line_of_text_and_are_not_stored(
    store: MediaStore, block: types.ContentBlock, named: str
) -> None:
    [part] = result_parts(types.CallToolResult(content=[block]), store)
    assert isinstance(part, TextPart)
    assert part.text.startswith(named)
    assert "no media part kind takes this mime type" in part.text
    assert SENT[:12] not in part.text
    assert stored_files(store) == []
