"""Text that is safe to log, dead-letter or store: clipped, without secrets or media bytes.

One place for the three rules every error path follows: `clip` bounds a reason's length,
`scrub` removes known secrets and long base64 runs (inline media a server echoed back)
from provider messages, and `redact_secrets` replaces anything shaped like an API key,
bearer token or password, which the event log applies to every text it keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "REASON_LIMIT",
    "SUBSTRING_SECRET_CHARS",
    "clip",
    "is_credential_name",
    "redact_secrets",
    "scrub",
]

REASON_LIMIT = 1000
"""Characters a dead-letter reason or a run's error message keeps."""

_SCRUB_LIMIT = 2000
SUBSTRING_SECRET_CHARS = 16
"""Secrets this long are scrubbed even inside a longer token; shorter ones as whole tokens."""
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{48,}={0,2}")

# Secrets that must never reach a log: Google and OpenAI style API keys, bearer tokens and
# `name: value` / `name=value` pairs whose name says they are credentials (api key, access
# or auth token, secret, password, x-goog-api-key, ...; not any word ending in "key"). The
# name is kept, the value goes. A quoted value (JSON, Python, headers) is replaced inside its
# quotes whatever its length, so JSON stays valid JSON; a bare value needs 12 characters.
_NAME = (
    r"[A-Za-z0-9_-]{0,40}?(?:api[_ -]?key|access[_ -]?token|auth[_-]?token|refresh[_-]?token"
    r"|secret(?:[_-]?key)?|password|passwd)"
)
_CREDENTIAL_NAME = re.compile(rf"(?i:{_NAME})")
_SECRET = re.compile(
    r"AIza[0-9A-Za-z_\-]{30,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]{12,}=*"
    rf"|(?P<name>\b(?i:{_NAME})|(?<=[?&])key)"  # or a URL's ?key= (Google API keys)
    r"(?P<sep>(?:\\?[\"'])?\s*[=:]\s*)"
    r"(?:"
    r"\"(?P<dq>(?:\\.|[^\"\\\n])+)\""  # "value" (JSON): escapes kept inside
    r"|'(?P<sq>(?:\\.|[^'\\\n])+)'"  # 'value'
    r"|\\\"(?P<eq>(?:(?!\\\").)+)\\\""  # \"value\" (JSON inside a JSON string)
    r"|(?P<bare>[A-Za-z0-9._~+/\-]{12,}=*)"
    r")"
)
_REDACTED = "[REDACTED]"
_API_KEY_HINT = re.compile(r"api[_ -]?key")
"""What a credential name with "key" in it holds (a JSON field named `key` does not)."""


def clip(text: str, limit: int = REASON_LIMIT) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove `secrets` and long base64 runs from `text`, and cap its length.

    A secret of `SUBSTRING_SECRET_CHARS` characters or more goes wherever it appears; a
    shorter one only where it stands as a whole token (no letter, digit, `_` or `-` right
    before or after it), so a short test key such as `x` leaves `rate_limit_exceeded` whole."""
    for secret in secrets:
        if not secret:
            continue
        if len(secret) >= SUBSTRING_SECRET_CHARS:
            text = text.replace(secret, "[redacted]")
        elif secret in text:
            whole = rf"(?<![A-Za-z0-9_\-]){re.escape(secret)}(?![A-Za-z0-9_\-])"
            text = re.sub(whole, "[redacted]", text)
    text = _BASE64_RUN.sub("[data elided]", text)
    if len(text) > _SCRUB_LIMIT:
        text = text[:_SCRUB_LIMIT] + " [truncated]"
    return text


def _redact_match(match: re.Match[str]) -> str:
    if match.group("name") is None:  # a key or token recognised by its own shape
        found = match.group(0)
        return found[:6] + " " + _REDACTED if found[:6].lower() == "bearer" else _REDACTED
    lead = match.group("name") + match.group("sep")
    for group, quote in (("dq", '"'), ("sq", "'"), ("eq", '\\"')):
        if match.group(group) is not None:
            return f"{lead}{quote}{_REDACTED}{quote}"
    # a bare value after a quoted name ("api_key": 123...) is a JSON number: quote the mark
    sep = match.group("sep")
    quote = '\\"' if sep.startswith('\\"') else sep[:1] if sep[:1] in ('"', "'") else ""
    return f"{lead}{quote}{_REDACTED}{quote}"


def is_credential_name(name: str) -> bool:
    """Whether a field, header or metadata name says its value is a credential."""
    return _CREDENTIAL_NAME.fullmatch(name) is not None


def redact_secrets(text: str) -> str:
    """`text` with anything that looks like an API key, bearer token or password replaced."""
    lowered = text.lower()
    if (  # a cheap first look: every secret pattern contains one of these
        "aiza" in lowered
        or "sk-" in lowered
        or "bearer" in lowered
        or "token" in lowered
        or "passwd" in lowered
        or "secret" in lowered
        or "password" in lowered
        or _API_KEY_HINT.search(lowered) is not None  # api key, api_key, apikey, api-key
        or "?key" in lowered
        or "&key" in lowered
    ):
        return _SECRET.sub(_redact_match, text)
    return text
