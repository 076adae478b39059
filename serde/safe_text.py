"""Text that is safe to log, dead-letter or store: clipped, without secrets or media bytes.

One place for the three rules every error path follows: `clip` bounds a reason's length,
`scrub` removes known secrets and long base64 runs (inline media a server echoed back)
from provider messages, and `redact_secrets` replaces anything shaped like an API key,
bearer token or password, which the event log applies to every text it keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REASON_LIMIT", "clip", "redact_secrets", "scrub"]

REASON_LIMIT = 1000
"""Characters a dead-letter reason or a run's error message keeps."""

_SCRUB_LIMIT = 2000
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{48,}={0,2}")

# Secrets that must never reach a log: Google and OpenAI style API keys, bearer tokens and
# `key=value` pairs whose name says they are credentials. The name is kept, the value goes.
_SECRET = re.compile(
    r"AIza[0-9A-Za-z_\-]{30,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]{12,}=*"
    r"|(?i:\b(?:api[_-]?key|x-goog-api-key|access[_-]?token|secret|password|key)"
    r"[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9._~+/\-]{12,}"
)
_NAMED_SECRET = re.compile(r"^(.*?[=:]\s*[\"']?)", re.DOTALL)
_REDACTED = "[REDACTED]"


def clip(text: str, limit: int = REASON_LIMIT) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove `secrets` and long base64 runs from `text`, and cap its length."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _BASE64_RUN.sub("[data elided]", text)
    if len(text) > _SCRUB_LIMIT:
        text = text[:_SCRUB_LIMIT] + " [truncated]"
    return text


def _redact_match(match: re.Match[str]) -> str:
    found = match.group(0)
    if found.startswith(("AIza", "sk-")):
        return _REDACTED
    if found[:6].lower() == "bearer":
        return found[:6] + " " + _REDACTED
    name = _NAMED_SECRET.match(found)
    return (name.group(1) if name else "") + _REDACTED


def redact_secrets(text: str) -> str:
    """`text` with anything that looks like an API key, bearer token or password replaced."""
    lowered = text.lower()
    if (  # a cheap first look: every secret pattern contains one of these
        "aiza" in lowered
        or "sk-" in lowered
        or "bearer" in lowered
        or "key" in lowered
        or "token" in lowered
        or "secret" in lowered
        or "password" in lowered
    ):
        return _SECRET.sub(_redact_match, text)
    return text
