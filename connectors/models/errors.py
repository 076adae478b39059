"""The provider error hierarchy: what went wrong in a model call, without keys or media bytes.

Every adapter maps its SDK's exceptions onto these classes, keeping the provider's HTTP
status, error code and message. Messages pass through `serde.safe_text.scrub`, which
removes the API key and any long base64 run (inline media echoed by a server), so an
error can be logged, dead-lettered or stored in an event without leaking either.
"""

from __future__ import annotations

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
]


class ProviderError(Exception):
    """A model call failed: the provider, HTTP status, provider error code and message.

    `retry_after` holds the delay the provider asked for (Retry-After), when it sent one;
    `attempts` how many requests were sent before giving up.
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
        self.message = message
        self.provider = provider
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.attempts = 1
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
