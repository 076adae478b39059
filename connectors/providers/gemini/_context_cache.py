"""`ContextCache`: one model instance's explicit Gemini context cache and its life cycle.

What a cache holds is the request's system instruction, tools and agent documents
(`GeminiRequest.cache_config`). The cache lives in memory only, one per model instance,
so one per Flink subtask (never in a checkpoint: a restored job starts with none and
creates one). Its states:

- none yet: the request goes uncached and, once its reply shows the prompt is at least
  `min_tokens`, creation starts in the background; turns never wait for it;
- ready: requests reference it by name and omit what it holds;
- evicted: a request referencing it was answered NOT_FOUND (TTL elapsed, deleted), so the
  same request is sent once more uncached and the handle dropped: the next turn creates
  a fresh cache;
- off: the backend or model refused the cache (a refused creation, or a referencing
  request refused where the same request uncached is answered), or the cache came out
  smaller than `min_tokens`: caching stays off for this model instance, with one warning.

What happened is logged and queued as facts (`ChatResponse.cache_events`) for the event log.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from streamagents.connectors.providers._prefix_cache import PrefixCache, PrefixCacheSettings
from streamagents.connectors.providers.errors import BadRequest, ProviderError
from streamagents.connectors.providers.gemini.wire import GeminiRequest
from streamagents.serde.chat import ChatResponse

__all__ = ["CacheCreated", "ContextCache", "ContextCacheSettings"]

_log = logging.getLogger(__name__)

_RETRY_CREATE_AFTER_S = 60.0
"""How long after a transient creation failure (429, 5xx, timeout) the next try waits."""


class ContextCacheSettings(PrefixCacheSettings):
    """How a Gemini model caches its request prefix (system instruction, tools, documents)."""

    display_name: str = Field(
        default="streamagents",
        max_length=128,
        description="Name shown for the cache in the provider's console.",
    )

    @classmethod
    def for_prefix(cls, cache: PrefixCache) -> ContextCacheSettings:
        """The settings of a neutral `PrefixCache`: its display name names its owner, within
        the 128 characters the API takes."""
        return cls(
            ttl_s=cache.ttl_s,
            min_tokens=cache.min_tokens,
            display_name=f"streamagents {cache.owner}"[:128],
        )


@dataclass(frozen=True)
class CacheCreated:
    """A cache the server created: its resource name and the tokens it holds."""

    name: str
    tokens: int


Send = Callable[[GeminiRequest], Awaitable[ChatResponse]]
Create = Callable[[GeminiRequest, ContextCacheSettings], Awaitable[CacheCreated]]
Delete = Callable[[str], Awaitable[None]]


_GONE = re.compile(r"not[ _]?found|expired|not exist|permission", re.IGNORECASE)
_CACHE = re.compile(r"cached[ _]?content|\bcache\b", re.IGNORECASE)


def is_cache_gone(error: ProviderError) -> bool:
    """Whether a referencing request failed because the cache no longer exists: a 404, or a
    400/403 whose message says a cached content was not found, expired or not permitted
    (the exact reply to an expired cache was not observed live: a gone cache must not be
    taken for a refusal, which would turn caching off for good)."""
    if error.status == 404:
        return True
    text = f"{error.code} {error.message}"
    return error.status in (400, 403) and bool(_CACHE.search(text) and _GONE.search(text))


class ContextCache:
    """The context cache of one model instance: created off the turn path, referenced
    when ready, recreated after eviction, turned off when refused."""

    def __init__(self, settings: ContextCacheSettings, create: Create, delete: Delete) -> None:
        self.settings = settings
        self._create = create
        self._delete = delete
        self._reset()

    def _reset(self) -> None:
        self._handle: tuple[str, str] | None = None  # (cache key, cache name)
        self._creating: asyncio.Task[CacheCreated] | None = None
        self._creating_key: str | None = None
        self._retry_at = 0.0
        self._deleting: set[asyncio.Task[None]] = set()  # strong refs until they finish
        self.off_reason: str | None = None
        self._events: list[dict[str, str]] = []

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the settings only: a cache handle must not outlive this process."""
        return {"settings": self.settings, "_create": self._create, "_delete": self._delete}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    @property
    def name(self) -> str | None:
        """The ready cache's resource name, if any."""
        return None if self._handle is None else self._handle[1]

    async def answer(self, request: GeminiRequest, send: Send) -> ChatResponse:
        """Send `request`, referencing the cache when one is ready for its content."""
        self._harvest()
        if self.off_reason is not None or not request.cacheable:
            return self._with_events(await send(request))
        key = request.cache_key()
        if self._handle is None or self._handle[0] != key:
            response = await send(request)
            self._maybe_create(request, key, response.usage.input_tokens)
            return self._with_events(response)
        name = self._handle[1]
        try:
            response = await send(request.referencing(name))
        except BadRequest as error:
            response = await self._uncached_after(error, request, name, send)
        else:
            response = response.model_copy(update={"cached_content": name})
        return self._with_events(response)

    async def _uncached_after(
        self, error: BadRequest, request: GeminiRequest, name: str, send: Send
    ) -> ChatResponse:
        """The one uncached retry after a referencing request failed with `error`."""
        if is_cache_gone(error):
            if self.name == name:
                self._handle = None
                self._note("evicted", name, f"the cache is gone ({error}); retried uncached")
                _log.info("context cache %s is gone (%s): retrying uncached", name, error.status)
            return await send(request)
        response = await send(request)  # raises when the request itself is bad
        self._turn_off(f"a request referencing the cache was refused: {error}", name)
        return response

    def _maybe_create(self, request: GeminiRequest, key: str, prompt_tokens: int) -> None:
        if self._handle is not None and self._handle[0] == key:
            return  # a creation finished while this turn's uncached request was out
        if self._creating is not None and self._creating_key == key:
            return
        if prompt_tokens < self.settings.min_tokens or time.monotonic() < self._retry_at:
            return
        if self._creating is not None:
            self._creating.cancel()
        self._creating_key = key
        self._creating = asyncio.get_running_loop().create_task(
            self._create(request, self.settings)
        )
        self._creating.add_done_callback(lambda _task: self._harvest())

    def _harvest(self) -> None:
        """Take the result of a finished creation, if there is one."""
        task = self._creating
        if task is None or not task.done():
            return
        self._creating, key = None, self._creating_key
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            created = task.result()
            if created.tokens < self.settings.min_tokens:
                self._turn_off(
                    f"the cache holds {created.tokens} tokens, fewer than min_tokens="
                    f"{self.settings.min_tokens}",
                    created.name,
                )
                task = asyncio.get_running_loop().create_task(self._quiet_delete(created.name))
                self._deleting.add(task)
                task.add_done_callback(self._deleting.discard)
                return
            self._handle = (key or "", created.name)
            self._note("created", created.name, f"{created.tokens} tokens", tokens=created.tokens)
            _log.info("context cache %s created (%d tokens)", created.name, created.tokens)
        elif isinstance(error, ProviderError) and isinstance(error, BadRequest):
            self._turn_off(f"the server refused to create a cache: {error}", None)
        else:
            self._retry_at = time.monotonic() + _RETRY_CREATE_AFTER_S
            self._note("create_failed", None, f"{type(error).__name__}: {error}")
            _log.warning("context cache creation failed, trying again later: %s", error)

    async def _quiet_delete(self, name: str) -> None:
        try:
            await self._delete(name)
        except Exception as error:  # the server evicts it at its TTL anyway
            _log.info("deleting context cache %s failed: %s", name, error)

    def _turn_off(self, reason: str, name: str | None) -> None:
        self.off_reason = reason
        self._handle = None
        self._note("off", name, reason)
        _log.warning("context caching turned off for model instance: %s", reason)

    def _note(self, action: str, name: str | None, reason: str, **facts: Any) -> None:
        event = {"action": action, "reason": reason, **{k: str(v) for k, v in facts.items()}}
        if name is not None:
            event["cache"] = name
        self._events.append(event)

    def _with_events(self, response: ChatResponse) -> ChatResponse:
        if not self._events:
            return response
        events, self._events = self._events, []
        return response.model_copy(update={"cache_events": [*response.cache_events, *events]})
