"""Text that is safe to log, dead-letter or store: clipped, without secrets or media bytes.

One place for the rules every error path and every emitted text follows: `clip` bounds a
reason's length, `scrub` removes known secrets and long base64 runs (inline media a server
echoed back) from provider messages, `redact_secrets` replaces anything shaped like an API
key, token, password, private key or a URL's user info, which every kept or printed text
passes, and a `Redactor` does both for a job: the secret values it knows (of
`MIN_SECRET_CHARS` or more), then the shapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "MIN_SECRET_CHARS",
    "REASON_LIMIT",
    "SUBSTRING_SECRET_CHARS",
    "Redactor",
    "clip",
    "is_credential_name",
    "redact_secrets",
    "scrub",
    "url_secrets",
]

REASON_LIMIT = 1000
"""Characters a dead-letter reason or a run's error message keeps."""

_SCRUB_LIMIT = 2000
SUBSTRING_SECRET_CHARS = 16
"""Secrets this long are scrubbed even inside a longer token; shorter ones as whole tokens."""
MIN_SECRET_CHARS = 6
"""A `Redactor` leaves a known value shorter than this alone: it would mangle ordinary words."""
_TOKEN_EDGE = r"A-Za-z0-9_\-"
"""What may not stand right before or after a short secret replaced as a whole token."""
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{48,}={0,2}")

# Secrets that must never reach a log. Some are known by their own shape: Google and OpenAI
# style API keys, AWS access key ids, GitHub, Slack and JSON Web tokens, PEM private keys,
# the value of a Bearer or Basic authorization, the user info of a URL (`scheme://user:
# password@host`, of which only `scheme://` is kept). Others by their name: `name: value` /
# `name=value` pairs whose name says they are credentials (api key, access or auth token,
# secret, password, x-goog-api-key, ...; not any word ending in "key"), and a URL's query
# parameters that carry a key, token or signature. The name is kept, the value goes. A
# quoted value (JSON, Python, headers) is replaced inside its quotes whatever its length,
# so JSON stays valid JSON; a bare value needs 12 characters.
_NAME = (
    r"[A-Za-z0-9_-]{0,40}?(?:api[_ -]?key|access[_ -]?token|auth[_-]?token|refresh[_-]?token"
    r"|secret(?:[_-]?access)?(?:[_-]?key)?|password|passwd)"
)
_QUERY_NAME = (
    r"(?<=[?&])(?i:key|token|sig|signature|x-amz-signature|x-amz-credential"
    r"|x-amz-security-token|x-goog-signature|x-goog-credential)"
)
_CREDENTIAL_NAME = re.compile(rf"(?i:{_NAME})")
_SECRET = re.compile(
    r"AIza[0-9A-Za-z_\-]{30,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    # a PEM key to its END line, or (cut short) to the end of its quoted string
    r"|-----BEGIN[A-Z ]*PRIVATE KEY-----[^\"']*?(?:-----END[A-Z ]*PRIVATE KEY-----|(?=\\?[\"'])|\Z)"
    r"|(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#\"'\\]+@"
    r"|(?P<bearer>(?i:\bbearer\s+))[A-Za-z0-9._~+/\-]{12,}=*"
    r"|(?P<basic>(?i:\bbasic\s+))(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{12,}=*"
    rf"|(?P<name>\b(?i:{_NAME})|{_QUERY_NAME})"
    r"(?P<sep>(?:\\?[\"'])?\s*[=:]\s*)"
    r"(?:"
    r"\"(?P<dq>(?:\\.|[^\"\\\n])+)\""  # "value" (JSON): escapes kept inside
    r"|'(?P<sq>(?:\\.|[^'\\\n])+)'"  # 'value'
    r"|\\\"(?P<eq>(?:(?!\\\").)+)\\\""  # \"value\" (JSON inside a JSON string)
    r"|(?P<bare>[A-Za-z0-9._~+/\-]{12,}=*)"
    r")"
)
_HINT = re.compile(
    r"a(?:iza|kia|sia|pi[_ -]?key|ccess[_ -]?token|uth[_-]?token)|s(?:k-|ecret)"
    r"|g(?:h[pousr]_|ithub_pat_)|xox|eyj|p(?:rivate key|assw)|://|b(?:earer|asic)"
    r"|refresh[_-]?token|[?&](?:key|token|sig|x-amz-|x-goog-)"
)
"""What a lower-cased text holds when any secret pattern could match: each branch of
`_SECRET` by its fixed part, grouped by first letter (a cheap first look, about 7 us for a
400-character record here: a record's `input_tokens` or `"key"` field is no hint, so most
texts skip the full pattern, which costs about 15 times as much)."""
_REDACTED = "[REDACTED]"


def clip(text: str, limit: int = REASON_LIMIT) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove `secrets` and long base64 runs from `text`, and cap its length.

    A secret of `SUBSTRING_SECRET_CHARS` characters or more goes wherever it appears; a
    shorter one only where it stands as a whole token (no letter, digit, `_` or `-` right
    before or after it), so a short test key such as `x` leaves `rate_limit_exceeded` whole."""
    known = _known_pattern(_known_forms(secrets, 1))
    if known is not None:
        text = known.sub("[redacted]", text)
    text = _BASE64_RUN.sub("[data elided]", text)
    if len(text) > _SCRUB_LIMIT:
        text = text[:_SCRUB_LIMIT] + " [truncated]"
    return text


def _known_forms(secrets: Iterable[str | None], min_chars: int) -> tuple[str, ...]:
    """Every secret of `min_chars` or more, as written and as a JSON string holds it (escaped,
    with or without non-ASCII escapes), the longest first (it wins where two start)."""
    forms: set[str] = set()
    for secret in secrets:
        if secret and len(secret) >= min_chars:
            forms.update(
                (secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1])
            )
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def _known_pattern(forms: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for `forms` (None when there is none): a form of `SUBSTRING_SECRET_CHARS`
    or more matches anywhere, a shorter one only as a whole token."""
    if not forms:
        return None
    branches = [re.escape(form) for form in forms if len(form) >= SUBSTRING_SECRET_CHARS]
    whole = [re.escape(form) for form in forms if len(form) < SUBSTRING_SECRET_CHARS]
    if whole:
        branches.append(rf"(?<![{_TOKEN_EDGE}])(?:{'|'.join(whole)})(?![{_TOKEN_EDGE}])")
    return re.compile("|".join(branches))


def _redact_match(match: re.Match[str]) -> str:
    if match.group("scheme") is not None:  # a URL's user info
        return match.group("scheme") + _REDACTED + "@"
    for word in ("bearer", "basic"):  # a Bearer or Basic authorization
        if match.group(word) is not None:
            return match.group(word) + _REDACTED
    if match.group("name") is None:  # a key or token recognised by its own shape
        return _REDACTED
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
    if _HINT.search(text.lower()) is not None:
        return _SECRET.sub(_redact_match, text)
    return text


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries, for `scrub`: its user name and password (as written
    and decoded) and the value of every query parameter."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.username, parts.password]
    except ValueError:  # a malformed port or host: nothing can be read from it
        return []
    found += [value for _, value in parse_qsl(parts.query, keep_blank_values=False)]
    return [piece for value in found if value for piece in {value, unquote(value)}]


@dataclass(frozen=True)
class Redactor:
    """What every text a job emits passes (records, events, spans): the job's own secret
    values replaced, then every secret shape (`redact_secrets`).

    A known value of `MIN_SECRET_CHARS` or more is replaced wherever it stands when it has
    `SUBSTRING_SECRET_CHARS` or more, else where it stands as a whole token; a shorter one
    is left alone. Built once (`Redactor.of`), it is hashable and can be pickled."""

    forms: tuple[str, ...] = field(default=(), repr=False)
    """The known values in every form a text may hold them, the longest first."""
    pattern: re.Pattern[str] | None = field(default=None, repr=False)
    """The pattern that replaces them (None without any)."""

    @classmethod
    def of(cls, secrets: Iterable[str | None]) -> Redactor:
        """The redactor of a job whose secret values are `secrets`."""
        forms = _known_forms(secrets, MIN_SECRET_CHARS)
        return cls(forms, _known_pattern(forms))

    def __call__(self, text: str) -> str:
        """`text` without the known secret values and without anything shaped like one."""
        if self.pattern is not None and any(form in text for form in self.forms):
            text = self.pattern.sub(_REDACTED, text)
        return redact_secrets(text)
