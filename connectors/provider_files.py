"""Files a provider holds for media of the store: (endpoint, sha256) → file reference, expiry.

A model with `upload_media` sends media to its provider's file API once and refers to the
file afterwards. Which file holds which bytes is kept beside the media store, on the same
pyarrow filesystem, so every subtask of a job (and the job after a restart) finds it: one
small JSON object per (endpoint, digest), at
`<root>/provider-files/<endpoint>/<ab>/<sha256>.json`, where `<endpoint>` is a digest of the
endpoint's name (its family and base URL). Each object is written to a temporary name and
renamed into place, so a reader sees a whole mapping or none; two subtasks that upload the
same bytes at once each write a whole mapping, and the last rename wins (both files exist at
the provider; either is a right answer). An object that cannot be read is treated as
missing: the media is uploaded again and it is replaced. No media bytes and no key are ever
written here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import uuid
from dataclasses import asdict, dataclass

import pyarrow.fs as pafs

from streamagents.connectors.media import _open_filesystem, shown_root

__all__ = ["ProviderFile", "ProviderFileIndex"]

_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ProviderFile:
    """A file a provider holds: how requests refer to it, its name there and its expiry."""

    reference: str
    """What a request carries: Gemini's file URI, OpenAI's file id."""
    name: str
    """The provider's name of the file (Gemini `files/...`, OpenAI's id)."""
    mime_type: str
    """The media's mime type, as uploaded."""
    size_bytes: int
    """The media's length in bytes."""
    expires_at: float | None
    """Unix time the provider deletes the file at; None when it keeps it until deleted."""

    def usable_at(self, now: float, margin_s: float) -> bool:
        """Whether a request sent at `now` may still refer to it (`margin_s` before expiry)."""
        return self.expires_at is None or now + margin_s < self.expires_at


class ProviderFileIndex:
    """The mapping (endpoint, sha256) → `ProviderFile`, on the media store's filesystem."""

    def __init__(self, root: str, endpoint: str) -> None:
        self.root = root
        self.endpoint = endpoint
        self._fs, base, _ = _open_filesystem(root)
        endpoint_digest = hashlib.sha256(endpoint.encode()).hexdigest()[:24]
        self._base = f"{base}/provider-files/{endpoint_digest}"

    def __repr__(self) -> str:
        return f"ProviderFileIndex({shown_root(self.root)!r}, {self.endpoint!r})"

    def _path(self, sha256: str) -> str:
        if not _DIGEST.match(sha256):
            raise ValueError("a media digest is 64 lowercase hex characters")
        return f"{self._base}/{sha256[:2]}/{sha256}.json"

    def get(self, sha256: str) -> ProviderFile | None:
        """The file recorded for `sha256`, or None (none recorded, or unreadable)."""
        try:
            with self._fs.open_input_stream(self._path(sha256)) as stream:
                fields = json.loads(stream.read())
            return ProviderFile(**fields["file"])
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, sha256: str, file: ProviderFile) -> None:
        """Record `file` for `sha256`, replacing what was recorded (atomically)."""
        path = self._path(sha256)
        parent = path.rsplit("/", 1)[0]
        self._fs.create_dir(parent, recursive=True)
        body = json.dumps({"endpoint": self.endpoint, "sha256": sha256, "file": asdict(file)})
        temp = f"{parent}/.tmp-{sha256[:16]}-{uuid.uuid4().hex}"
        try:
            with self._fs.open_output_stream(temp) as out:
                out.write(body.encode())
            self._fs.move(temp, path)
        finally:
            with contextlib.suppress(OSError):
                if self._fs.get_file_info(temp).type == pafs.FileType.File:
                    self._fs.delete_file(temp)
