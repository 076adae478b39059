"""`documents_message`: an agent's documents (files or URLs) as the user message every
request starts with, flagged so a context cache can hold it."""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Sequence
from pathlib import Path

from streamagents.connectors.media import MediaStore
from streamagents.serde.messages import (
    AGENT_DOCUMENTS,
    MEDIA_PART_CLASSES,
    ChatMessage,
    MediaPart,
    media_kind_for_mime,
)

__all__ = ["documents_message"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _part(document: str, store: MediaStore) -> MediaPart:
    mime_type = mimetypes.guess_type(document.split("?", 1)[0])[0]
    kind = None if mime_type is None else media_kind_for_mime(mime_type)
    if mime_type is None or kind is None:
        raise ValueError(
            f"documents: cannot tell the media type of {document!r} from its name (give it an "
            "extension such as .pdf, .txt, .png)"
        )
    if _URL.match(document):
        return MEDIA_PART_CLASSES[kind](mime_type=mime_type, url=document)
    try:
        data = Path(document).read_bytes()
    except OSError as error:
        raise ValueError(f"documents: cannot read {document!r}: {error.strerror}") from None
    return MEDIA_PART_CLASSES[kind](mime_type=mime_type, ref=store.put(data, mime_type))


def documents_message(documents: Sequence[str], store: MediaStore) -> ChatMessage | None:
    """The user message holding `documents` (files go to the media store and are sent by
    ref), or None when there are none; raises ValueError naming a document it cannot use."""
    if not documents:
        return None
    parts = [_part(document, store) for document in documents]
    return ChatMessage(role="user", parts=parts, metadata={AGENT_DOCUMENTS: True})
