"""What an agent asks of a provider's server-side cache, in neutral terms: the settings
(`PrefixCacheSettings`, declared once for the agent config and each provider's own) and the
request (`PrefixCache`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PrefixCache", "PrefixCacheSettings"]


class PrefixCacheSettings(BaseModel):
    """How long a cached request prefix lives and how large it must be to be worth one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttl_s: float = Field(
        default=3600.0,
        gt=0,
        le=7 * 24 * 3600,
        description="Lifetime of a cache; the server evicts it after that (and a new one is "
        "made on the next turn).",
    )
    min_tokens: int = Field(
        default=0,
        ge=0,
        description="Make a cache only for prompts of at least this many tokens, and drop one "
        "that holds fewer (storage would cost more than it saves).",
    )


class PrefixCache(PrefixCacheSettings):
    """A request to cache, on the provider's side, the prefix every request starts with
    (system instruction, tools, agent documents); `create_model` turns it into the
    provider's own setting (Gemini: `ContextCacheSettings`)."""

    owner: str = Field(
        description="Who the cache is for (the job id), shown with it in the provider's console."
    )
