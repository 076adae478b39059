"""The provider error hierarchy: what went wrong in a model call, without keys or media bytes.

Every adapter maps its SDK's exceptions onto these classes, keeping the provider's HTTP
status, error code and message; `error_for_status` is the one status table both
families use, and `reject_silent_empty` the one empty-reply rule all wires apply.
Messages and error codes pass through `serde.safe_text.scrub`, which removes the model's
credentials and any long base64 run (inline media echoed by a server), and every message
through `redact_secrets` here, so an error can be logged, dead-lettered or stored in an
event without leaking either.
"""

from __future__ import annotations

from streamagents.serde.chat import RetryAttempt
from streamagents.serde.safe_text import redact_secrets

__all__ = [
    "BadRequest",
    "ConnectionFailed",
    "EmptyResponseError",
    "InvalidContent",
    "MalformedResponse",
    "ProviderError",
    "RateLimited",
    "RequestTimeout",
    "ServerError",
    "UnsupportedContent",
    "error_for_status",
    "reject_silent_empty",
]


class ProviderError(Exception):
    """A model call failed: the provider, HTTP status, provider error code and message.

    `retry_after` holds the delay the provider asked for (Retry-After), when it sent one;
    `attempts` how many requests were sent before giving up, `retries` the failed attempts
    before the last one (set by the retry loop).
    """

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = redact_secrets(message)
        self.provider = provider
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.attempts = 1
        self.retries: list[RetryAttempt] = []
        super().__init__(self._describe())

    def _describe(self) -> str:
        facts = [f for f in (self.provider, self.status, self.code) if f not in (None, "")]
        prefix = " ".join(str(f) for f in facts)
        return f"{prefix}: {self.message}" if prefix else self.message


class RateLimited(ProviderError):
    """HTTP 429: the provider asks us to slow down; retried."""

    retryable = True


class BadRequest(ProviderError):
    """A 4xx other than 429: the request itself is wrong (or unauthorised); never retried."""


class ServerError(ProviderError):
    """A 5xx from the provider; retried."""

    retryable = True


class MalformedResponse(ServerError):
    """The provider answered 2xx with a body that is not the JSON its API promises; retried."""


class RequestTimeout(ProviderError):
    """No reply within the configured timeout; retried."""

    retryable = True


class ConnectionFailed(ProviderError):
    """The connection to the provider failed before a reply arrived; retried."""

    retryable = True


class EmptyResponseError(ProviderError):
    """A reply with no candidates/content and no finish reason (the silent empty response)."""


class UnsupportedContent(ProviderError, ValueError):
    """The request holds content this wire cannot carry; raised before anything is sent."""


class InvalidContent(ProviderError, ValueError):
    """A message breaks the message model's rules (e.g. malformed base64); nothing is sent."""


def error_for_status(
    status: int | None,
    message: str,
    *,
    provider: str,
    code: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """The error for an HTTP error status, the same table for every provider.

    429 is `RateLimited`, any other 4xx `BadRequest`, any 5xx `ServerError`. Anything else
    (no status, 1xx-3xx, 600 and above) is a plain `ProviderError`, which is not retried:
    we do not know what it means, so we do not repeat it.
    """
    facts = {"provider": provider, "status": status, "code": code, "retry_after": retry_after}
    if status == 429:
        return RateLimited(message, **facts)
    if status is not None and 400 <= status < 500:
        return BadRequest(message, **facts)
    if status is not None and 500 <= status < 600:
        return ServerError(message, **facts)
    return ProviderError(message, **facts)


def reject_silent_empty(
    has_content: bool, finish_reason: object | None, *, provider: str, explanation: str
) -> None:
    """The empty-reply rule every wire applies: a reply with no content and no finish
    reason is the silent empty reply, raised as `EmptyResponseError(explanation)`."""
    if not has_content and finish_reason is None:
        raise EmptyResponseError(explanation, provider=provider)
