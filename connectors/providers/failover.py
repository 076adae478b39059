"""Failover: a chain of models tried in order, each behind its own circuit breaker.

`FailoverModel` is a `ChatModel` over other models (any wire). A call goes to the first
model whose breaker lets it through; that model keeps its own retries (and whatever waits
its own attempt path has). When the call still fails with one of the failover conditions
(`rate_limited` past its retries, `server_error`, `timeout`, `connection`) the breaker
counts it and the call moves on to the next model; any other failure (a bad request) is
the call's outcome, as with a single model. A fallback that cannot carry the request's
content (`UnsupportedContent`) is passed over without counting against it. When no model
answers, the call fails with `ModelsUnavailable`, naming what happened to each.

Each reply is marked with its maker (`provider_data.MADE_BY`) and comes back with
`answered_by` and `passed_over` set; each model is sent the history with the
provider-specific data of other makers taken out (`provider_data.for_model`), and a
stored Interactions continuation (`previous_interaction_id`) only by the model that
stored it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamagents.connectors.providers.base import ChatModel
from streamagents.connectors.providers.circuit_breaker import BreakerSettings, CircuitBreaker
from streamagents.connectors.providers.errors import (
    ConnectionFailed,
    ProviderError,
    RateLimited,
    RequestTimeout,
    ServerError,
    UnsupportedContent,
)
from streamagents.connectors.providers.provider_data import (
    INTERACTION_ID,
    MADE_BY,
    for_model,
    made_by,
)
from streamagents.serde.chat import AnsweredBy, ChatResponse, ToolSpec
from streamagents.serde.messages import ChatMessage

__all__ = [
    "FAILOVER_CONDITIONS",
    "FailoverLink",
    "FailoverModel",
    "ModelsUnavailable",
    "failover_condition",
]

FAILOVER_CONDITIONS = ("rate_limited", "server_error", "timeout", "connection")
"""The failures that can move a call to the next model (all of them by default)."""
_CONDITION_OF: tuple[tuple[type[ProviderError], str], ...] = (
    (RateLimited, "rate_limited"),
    (ServerError, "server_error"),
    (RequestTimeout, "timeout"),
    (ConnectionFailed, "connection"),
)
_CONTINUATION = "previous_interaction_id"


def failover_condition(error: ProviderError) -> str | None:
    """The failover condition a model's error is, or None (it is the call's outcome)."""
    for kind, condition in _CONDITION_OF:
        if isinstance(error, kind):
            return condition
    return None


class ModelsUnavailable(ProviderError):
    """No model of a failover chain answered: each failed, was skipped or refused the call."""


@dataclass
class FailoverLink:
    """One model of a chain: its provider and model names, the model, its generation options."""

    provider: str
    model_name: str
    model: ChatModel
    generation: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """`provider/model`, how replies, metrics and errors name it."""
        return f"{self.provider}/{self.model_name}"


class FailoverModel(ChatModel):
    """Models tried in order behind their circuit breakers (see the module docstring).

    `achat`'s options are the first model's generation options (as a single model gets
    them); a fallback is sent its own `generation`."""

    provider = "failover"

    def __init__(
        self,
        links: Sequence[FailoverLink],
        *,
        conditions: Sequence[str] = FAILOVER_CONDITIONS,
        breaker: BreakerSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if len(links) < 2:
            raise ValueError("a failover chain needs a model and at least one fallback")
        unknown = sorted(set(conditions) - set(FAILOVER_CONDITIONS))
        if unknown:
            raise ValueError(
                f"unknown failover condition {', '.join(unknown)}; "
                f"known: {', '.join(FAILOVER_CONDITIONS)}"
            )
        self.links = list(links)
        self.conditions = frozenset(conditions)
        settings = breaker or BreakerSettings()
        self.breakers = {link.name: CircuitBreaker(settings, clock) for link in self.links}
        """Each model's breaker, by `provider/model`."""

    @property
    def primary(self) -> FailoverLink:
        """The chain's first model."""
        return self.links[0]

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Send the call to the first model that takes and answers it (module docstring)."""
        continuation = options.pop(_CONTINUATION, None)
        continued_by = _maker_of(messages, continuation, self.primary.name)
        passed_over: list[str] = []
        reasons: list[str] = []
        attempts = 0
        for index, link in enumerate(self.links):
            breaker = self.breakers[link.name]
            permit = breaker.acquire()
            if permit is None:
                passed_over.append(link.name)
                reasons.append(f"{link.name}: circuit breaker open")
                continue
            sent = {**link.generation, **options} if index == 0 else dict(link.generation)
            if continuation is not None and continued_by == link.name:
                sent[_CONTINUATION] = continuation
            history = for_model(messages, link.name, link.provider, self.primary.name)
            try:
                response = await link.model.achat(history, tools, **sent)
            except UnsupportedContent as error:
                breaker.release(permit)
                if index == 0:
                    raise
                passed_over.append(link.name)
                reasons.append(f"{link.name}: {error}")
                continue
            except ProviderError as error:
                attempts += error.attempts
                if failover_condition(error) not in self.conditions:
                    breaker.release(permit)
                    raise
                breaker.failure(permit)
                passed_over.append(link.name)
                reasons.append(f"{link.name}: {type(error).__name__}: {error}")
                continue
            except BaseException:
                breaker.release(permit)
                raise
            breaker.success(permit)
            return _answered(response, link, index > 0, passed_over)
        unavailable = ModelsUnavailable(
            "no model of the failover chain answered: " + "; ".join(reasons),
            provider=self.provider,
        )
        unavailable.attempts = attempts
        raise unavailable

    def prepare(self) -> None:
        """Prepare every model of the chain (start their worker processes)."""
        for link in self.links:
            link.model.prepare()

    async def warm(self) -> None:
        """Warm every model of the chain."""
        for link in self.links:
            await link.model.warm()

    async def aclose(self) -> None:
        """Close every model of the chain."""
        for link in self.links:
            await link.model.aclose()


def _maker_of(messages: Sequence[ChatMessage], interaction: Any, default: str) -> str | None:
    """Which model made the reply that stored `interaction` (None: no message has it)."""
    if interaction is None:
        return None
    for message in reversed(messages):
        if message.metadata.get(INTERACTION_ID) == interaction:
            return made_by(message, default)
    return None


def _answered(
    response: ChatResponse, link: FailoverLink, fallback: bool, passed_over: list[str]
) -> ChatResponse:
    """The reply marked with its maker, and which model answered."""
    message = response.message
    marked = message.model_copy(update={"metadata": {**message.metadata, MADE_BY: link.name}})
    return response.model_copy(
        update={
            "message": marked,
            "answered_by": AnsweredBy(
                provider=link.provider, model=link.model_name, fallback=fallback
            ),
            "passed_over": passed_over,
        }
    )
