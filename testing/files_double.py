"""TEST DOUBLE, NOT A PROVIDER: Gemini's and OpenAI's file APIs for `LoopbackStubServer`.

`ProviderFilesDouble` is a responder that keeps uploaded files in memory and answers:

- Gemini's resumable upload as google-genai speaks it: `POST /upload/{version}/files` with
  `X-Goog-Upload-Command: start` (answered with an `X-Goog-Upload-URL`), then the bytes
  `POST`ed to that URL with `upload, finalize` (answered with the file and
  `X-Goog-Upload-Status: final`); `GET /{version}/files/{id}` (`files.get`);
- OpenAI's `POST /v1/files` (multipart: `purpose` and `file`);
- a model request that refers to a file it does not hold, or holds past its expiry, with
  the provider's refusal (Gemini 403 PERMISSION_DENIED, or 404 NOT_FOUND with
  `gemini_refusal=404`, both of which the Gemini API answers; OpenAI 404); every other
  request goes to `generate`.

A Gemini file is `PROCESSING` when uploaded and for its first `processing_gets`
`files.get`s (none by default: `ACTIVE` at once), then `ACTIVE`;
it expires `expires_in_s` after its upload.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from streamagents.connectors.loopback_stub import RecordedRequest, Responder, StubReply

__all__ = ["GEMINI_FILE_URI", "ProviderFilesDouble", "StoredFile"]

GEMINI_FILE_URI = "https://generativelanguage.googleapis.com/v1beta/"
"""Where the double says a Gemini file lives (its `uri` is this plus the file's name)."""
_GEMINI_START = re.compile(r"^/upload/[^/]+/files$")
_GEMINI_GET = re.compile(r"^/[^/]+/(files/[^/:]+)$")
_GEMINI_URI = re.compile(r'"(?:fileUri|file_uri)":\s*"([^"]+)"')
_OPENAI_FILE_ID = re.compile(r'"file_id":\s*"([^"]+)"')


@dataclass
class StoredFile:
    """One uploaded file as the double holds it."""

    name: str
    mime_type: str
    data: bytes
    purpose: str | None
    expires_at: float | None
    gets: int = 0


class ProviderFilesDouble:
    """TEST DOUBLE: the file APIs of both providers in memory; other requests to `generate`."""

    def __init__(
        self,
        generate: Responder,
        expires_in_s: float | None = 48 * 3600.0,
        processing_gets: int = 0,
        gemini_refusal: int = 403,
    ) -> None:
        if gemini_refusal not in (403, 404):
            raise ValueError("gemini_refusal is 403 or 404")
        self._generate = generate
        self.expires_in_s = expires_in_s
        self.processing_gets = processing_gets
        self.gemini_refusal = gemini_refusal
        self._lock = threading.Lock()
        self.files: dict[str, StoredFile] = {}
        self.uploads: list[StoredFile] = []
        self.refused: list[str] = []
        self.refuse_all = False
        """Refuse every reference to a file, held or not (a key that lost access to them)."""
        self._sessions: dict[str, dict[str, Any]] = {}

    def delete(self, name: str) -> None:
        """Forget a file, as the provider does when it is deleted or expires."""
        with self._lock:
            self.files.pop(name, None)

    def expire(self, name: str) -> None:
        """Let a held file's expiry pass now, sooner than the expiry its upload announced
        (the provider's clock ahead of ours): a request referring to it is refused."""
        with self._lock:
            self.files[name].expires_at = time.time() - 1.0

    def __call__(self, request: RecordedRequest) -> StubReply:
        path, _, query = request.path.partition("?")
        if path == "/v1/files" and request.method == "POST":
            return self._openai_upload(request)
        if _GEMINI_START.match(path) and "upload_id=" in query:
            return self._gemini_bytes(request, query.split("upload_id=", 1)[1])
        if _GEMINI_START.match(path):
            return self._gemini_start(request)
        found = _GEMINI_GET.match(path)
        if found and request.method == "GET":
            return self._gemini_get(found.group(1))
        missing = self._missing(request)
        if missing is not None:
            return missing
        reply = self._generate(request)
        return reply if isinstance(reply, StubReply) else StubReply(reply)

    def _store(self, name: str, mime_type: str, data: bytes, purpose: str | None) -> StoredFile:
        expires = None if self.expires_in_s is None else time.time() + self.expires_in_s
        stored = StoredFile(name, mime_type, data, purpose, expires)
        with self._lock:
            self.files[name] = stored
            self.uploads.append(stored)
        return stored

    def _gemini_start(self, request: RecordedRequest) -> StubReply:
        with self._lock:
            upload_id = str(len(self._sessions) + 1)
            self._sessions[upload_id] = (request.json or {}).get("file") or {}
        url = f"http://{request.headers['host']}{request.path}?upload_id={upload_id}"
        return StubReply({}, headers={"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"})

    def _gemini_bytes(self, request: RecordedRequest, upload_id: str) -> StubReply:
        with self._lock:
            started = self._sessions[upload_id]
            name = f"files/stub-{len(self.uploads) + 1}"
        mime = started.get("mimeType") or started.get("mime_type") or "application/octet-stream"
        stored = self._store(name, str(mime), request.body, None)
        return StubReply(
            {"file": self._gemini_file(stored)}, headers={"X-Goog-Upload-Status": "final"}
        )

    def _gemini_get(self, name: str) -> StubReply:
        with self._lock:
            stored = self.files.get(name)
            if stored is not None:
                stored.gets += 1
        if stored is None:
            return StubReply(_error(404, "NOT_FOUND", f"File {name} not found."), 404)
        return StubReply(self._gemini_file(stored))

    def _gemini_file(self, stored: StoredFile) -> dict[str, Any]:
        file = {
            "name": stored.name,
            "mimeType": stored.mime_type,
            "sizeBytes": str(len(stored.data)),
            "sha256Hash": hashlib.sha256(stored.data).hexdigest(),
            "uri": GEMINI_FILE_URI + stored.name,
            "state": "PROCESSING" if 0 < self.processing_gets >= stored.gets else "ACTIVE",
        }
        if stored.expires_at is not None:
            moment = datetime.fromtimestamp(stored.expires_at, UTC)
            file["expirationTime"] = moment.isoformat().replace("+00:00", "Z")
        return file

    def _openai_upload(self, request: RecordedRequest) -> StubReply:
        head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
        form = email.parser.BytesParser(policy=email.policy.default).parsebytes(head + request.body)
        fields: dict[str, Any] = {}
        for part in form.iter_parts():
            fields[part.get_param("name", header="content-disposition")] = part
        upload = fields["file"]
        data = upload.get_payload(decode=True)
        purpose = fields["purpose"].get_payload(decode=True).decode()
        with self._lock:
            name = f"file-stub{len(self.uploads) + 1}"
        stored = self._store(name, upload.get_content_type(), data, purpose)
        return StubReply(
            {
                "id": stored.name,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": upload.get_filename() or "upload",
                "purpose": purpose,
                "status": "processed",
                "expires_at": None if stored.expires_at is None else int(stored.expires_at),
            }
        )

    def _missing(self, request: RecordedRequest) -> StubReply | None:
        """The refusal of a request that refers to a file not held (or expired), or None."""
        text = request.body.decode("utf-8", "replace")
        now = time.time()
        with self._lock:
            for uri in _GEMINI_URI.findall(text):
                name = uri.removeprefix(GEMINI_FILE_URI)
                if not self._held(name, now) or self.refuse_all:
                    self.refused.append(name)
                    if self.gemini_refusal == 404:
                        message = f"File {name} was not found."
                        return StubReply(_error(404, "NOT_FOUND", message), 404)
                    message = (
                        f"You do not have permission to access the File {name} or it may not exist."
                    )
                    return StubReply(_error(403, "PERMISSION_DENIED", message), 403)
            for file_id in _OPENAI_FILE_ID.findall(text):
                if not self._held(file_id, now) or self.refuse_all:
                    self.refused.append(file_id)
                    body = {
                        "error": {
                            "message": f"No such File object: {file_id}",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    }
                    return StubReply(body, 404)
        return None

    def _held(self, name: str, now: float) -> bool:
        """Whether the file is held and not past its expiry (called under the lock)."""
        stored = self.files.get(name)
        return stored is not None and (stored.expires_at is None or now < stored.expires_at)


def _error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "status": status, "message": message}}
