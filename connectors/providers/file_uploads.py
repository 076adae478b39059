"""Provider file uploads (`upload_media`): large media go to the provider's file API once.

A model with `upload_media: {min_bytes: N}` sends every medium of N bytes or more that its
wire can refer to by file (`references_file` of each wire) to the provider's file API, once
per (endpoint, sha256), and its requests carry the file's reference instead of the bytes.
Which file holds which bytes is recorded beside the media store (`ProviderFileIndex`), so
other subtasks and a restarted job reuse it, and in memory for this process. A recorded file
is reused until `EXPIRY_MARGIN_S` before the expiry the provider gave it. When the provider
refuses a request that refers to files (404, 403, or a 400 that says a file is missing:
`file_rejected`), those files are uploaded again once, the mapping replaced, and the request
sent once more; a second refusal is the call's error.

Concurrent calls of one process that need the same bytes wait for one upload; calls of other
processes may upload the same bytes at the same time, and the index then keeps the last one
(both are valid files). Nothing here logs or raises media bytes or keys.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from streamagents.connectors.media import MediaStore
from streamagents.connectors.provider_files import ProviderFile, ProviderFileIndex
from streamagents.connectors.providers.errors import ProviderError
from streamagents.connectors.providers.media_encoding import filename_for
from streamagents.connectors.providers.neutral_request import (
    MessageLike,
    inline_bytes,
    media_digest,
    validated_message,
)
from streamagents.serde.messages import MediaPart

__all__ = ["EXPIRY_MARGIN_S", "FileUploads", "UploadMedia", "Uploader", "file_rejected"]

_LOG = logging.getLogger(__name__)
T = TypeVar("T")

EXPIRY_MARGIN_S = 600.0
"""A file within this many seconds of its expiry is uploaded again rather than referred to,
so that it does not expire while a request that refers to it is on its way."""

_MISSING_FILE = re.compile(
    r"not found|no such file|does not exist|not exist|permission|expired", re.IGNORECASE
)

Uploader = Callable[[bytes, str, str], Awaitable[ProviderFile]]
"""Uploads (bytes, mime type, filename) through the SDK and returns the file it made."""


class UploadMedia(BaseModel):
    """A model's `upload_media` setting: media of `min_bytes` or more go to the provider's
    file API once, and requests refer to the file instead of sending the bytes again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_bytes: int = Field(
        ge=1, description="The smallest medium (in bytes) uploaded; smaller ones stay inline."
    )


def file_rejected(error: ProviderError) -> bool:
    """Whether a refused request may have failed for a file it referred to being gone: 404,
    403 (Gemini answers a deleted or expired file that way), or a 400 that says so."""
    if error.status in (403, 404):
        return True
    return error.status == 400 and bool(_MISSING_FILE.search(error.message))


class FileUploads:
    """Which media of a request its provider holds as files, uploading those it lacks."""

    def __init__(
        self,
        settings: UploadMedia,
        index: ProviderFileIndex,
        store: MediaStore,
        references_file: Callable[[MediaPart], bool],
        upload: Uploader,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.index = index
        self._store = store
        self._references_file = references_file
        self._upload = upload
        self._clock = clock
        self._known: dict[str, ProviderFile] = {}
        self._uploading: dict[str, asyncio.Future[ProviderFile]] = {}

    def wanted(self, messages: Iterable[MessageLike]) -> dict[str, MediaPart]:
        """Each medium the request should send as a file: its sha256 and a part with it."""
        found: dict[str, MediaPart] = {}
        for item in messages:
            message = validated_message(item)
            if message.role == "assistant":  # refused by every wire when it holds media
                continue
            for part in message.media:
                size = part.size_bytes
                if size is None or size < self.settings.min_bytes:
                    continue
                if self._references_file(part):
                    digest = media_digest(part)
                    if digest is not None:
                        found.setdefault(digest, part)
        return found

    async def files_for(
        self, messages: Iterable[MessageLike], rejected: frozenset[str] = frozenset()
    ) -> dict[str, ProviderFile]:
        """The files (by sha256) a request of `messages` refers to, uploading the media that
        have none (or one whose reference is in `rejected`, or that is about to expire)."""
        wanted = self.wanted(messages)
        files = await asyncio.gather(
            *(self._file(digest, part, rejected) for digest, part in wanted.items())
        )
        return dict(zip(wanted, files, strict=True))

    async def answer(
        self, messages: Iterable[MessageLike], send: Callable[[Mapping[str, str]], Awaitable[T]]
    ) -> T:
        """`send` the request with the files it refers to (sha256 → reference); when the
        provider refuses it for a file (`file_rejected`), upload those files again once and
        send it once more."""
        messages = list(messages)
        files = await self.files_for(messages)
        try:
            return await send({digest: file.reference for digest, file in files.items()})
        except ProviderError as error:
            if not files or not file_rejected(error):
                raise
            rejected = frozenset(file.reference for file in files.values())
            _LOG.info(
                "the provider refused a request referring to %d uploaded file(s) (%s); "
                "uploading them again",
                len(files),
                error.status,
            )
        files = await self.files_for(messages, rejected)
        return await send({digest: file.reference for digest, file in files.items()})

    def _usable(self, file: ProviderFile, rejected: frozenset[str]) -> bool:
        return file.reference not in rejected and file.usable_at(self._clock(), EXPIRY_MARGIN_S)

    async def _file(self, digest: str, part: MediaPart, rejected: frozenset[str]) -> ProviderFile:
        known = self._known.get(digest)
        if known is not None and self._usable(known, rejected):
            return known
        running = self._uploading.get(digest)
        if running is None or running.get_loop() is not asyncio.get_running_loop():
            recorded = await asyncio.to_thread(self.index.get, digest)
            if recorded is not None and self._usable(recorded, rejected):
                self._known[digest] = recorded
                return recorded
            running = self._uploading.get(digest)  # another call may have started one meanwhile
            if running is None or running.get_loop() is not asyncio.get_running_loop():
                running = self._start_upload(digest, part)
        return await asyncio.shield(running)  # a cancelled call leaves the upload to the others

    def _start_upload(self, digest: str, part: MediaPart) -> asyncio.Future[ProviderFile]:
        """Start uploading the part; calls that need the same bytes meanwhile wait for it."""
        task = asyncio.ensure_future(self._uploaded(digest, part))
        self._uploading[digest] = task

        def finished(_: object) -> None:
            if self._uploading.get(digest) is task:
                del self._uploading[digest]

        task.add_done_callback(finished)
        return task

    async def _uploaded(self, digest: str, part: MediaPart) -> ProviderFile:
        """Upload the part's bytes, record the file (index and memory) and return it."""
        if part.ref is not None:
            data = await asyncio.to_thread(self._store.get, part.ref)
        else:
            data = inline_bytes(part) or b""
        file = await self._upload(data, part.mime_type, filename_for(part))
        await asyncio.to_thread(self.index.put, digest, file)
        self._known[digest] = file
        return file
