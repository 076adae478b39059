"""`PrefixCache`: what an agent asks of a provider's server-side cache, in neutral terms."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PrefixCache"]


@dataclass(frozen=True, kw_only=True)
class PrefixCache:
    """A request to cache, on the provider's side, the prefix every request starts with
    (system instruction, tools, agent documents); `create_model` turns it into the
    provider's own setting (Gemini: `ContextCacheSettings`)."""

    ttl_s: float
    """How long a cache lives; the server evicts it after that."""
    min_tokens: int
    """Cache only prompts of at least this many tokens."""
    owner: str
    """Who the cache is for (the job id), shown with it in the provider's console."""
