"""Pieces shared by the adapters' client classes: SDK clients per event loop, transport faults.

An async SDK client holds connections tied to the event loop that opened them; `chat()`
runs each call in a fresh loop, so an adapter keeps one client per running loop and
builds a new one when the loop changes. Transport failures (timeouts, refused or reset
connections) are recognised for whichever HTTP library the SDK uses.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from streamagents.connectors.models.errors import ConnectionFailed, ProviderError, RequestTimeout

__all__ = ["LoopBoundClient", "transport_error"]

C = TypeVar("C")


def _http_exception_types(name: str) -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found.append(getattr(module, name))
    return tuple(found)


_TIMEOUTS = (TimeoutError, asyncio.TimeoutError, *_http_exception_types("TimeoutException"))
_TRANSPORT = (OSError, *_http_exception_types("TransportError"))


def transport_error(
    error: BaseException, provider: str, timeout: float | None
) -> ProviderError | None:
    """The `RequestTimeout`/`ConnectionFailed` for an HTTP-library failure, else None."""
    if isinstance(error, _TIMEOUTS):
        return RequestTimeout(f"no reply within {timeout} s", provider=provider)
    if isinstance(error, _TRANSPORT):
        return ConnectionFailed(f"connection failed ({type(error).__name__})", provider=provider)
    return None


class LoopBoundClient(Generic[C]):
    """Builds an SDK client lazily, once per running event loop."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: C | None = None

    def get(self) -> C:
        """The client for the running loop (built on first use in that loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client

    def take_current(self) -> C | None:
        """Detach and return the client when it belongs to the running loop, else None."""
        client, same_loop = self._client, self._loop is asyncio.get_running_loop()
        self._client, self._loop = None, None
        return client if same_loop else None
