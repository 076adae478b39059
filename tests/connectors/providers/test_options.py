"""Each provider's declared options: the generation options match what its SDK takes, the
ones a wire sets itself excepted, and reach the request; unknown keys are named."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import types
from google.genai._gaos.types.interactions.generationconfig import GenerationConfigParam
from openai.types.chat.completion_create_params import CompletionCreateParamsBase
from openai.types.responses.response_create_params import ResponseCreateParamsBase
from pydantic import ValidationError

from streamagents.connectors.providers import PROVIDER_NAMES, create_model
from streamagents.connectors.providers.options import (
    GeminiGeneration,
    GeminiInteractionsGeneration,
    OpenAIChatGeneration,
    OpenAIResponsesGeneration,
    checked,
    client_options,
    generation_options,
)
from streamagents.serde.messages import ChatMessage

NEUTRAL = {"max_tokens", "stop"}
"""Neutral names a wire renames to its own."""
OPENAI_OWN = {"extra_body"}
"""Ours: an OpenAI-compatible server's own body fields."""


def fields(kind: Any) -> set[str]:
    return set(kind.model_fields)


@pytest.mark.parametrize(
    ("declared", "sdk", "set_by_the_wire", "ours"),
    [
        (
            GeminiGeneration,
            set(types.GenerateContentConfig.model_fields),
            {"system_instruction", "tools", "tool_config"},
            NEUTRAL,
        ),
        (
            OpenAIChatGeneration,
            set(CompletionCreateParamsBase.__annotations__),
            {"messages", "model", "tools"},
            OPENAI_OWN,
        ),
        (
            OpenAIResponsesGeneration,
            set(ResponseCreateParamsBase.__annotations__),
            {"input", "instructions", "model", "tools"},
            {"max_tokens", *OPENAI_OWN},
        ),
    ],
)
def test_the_generation_options_are_the_sdks_request_fields_the_wire_does_not_set(
    declared: Any, sdk: set[str], set_by_the_wire: set[str], ours: set[str]
) -> None:
    assert fields(declared) == (sdk - set_by_the_wire) | ours


def test_the_interactions_options_are_its_generation_config_and_the_bodys_own_fields() -> None:
    from streamagents.connectors.providers.gemini.interactions_wire import _TOP_LEVEL

    expected = set(GenerationConfigParam.__annotations__) | _TOP_LEVEL | NEUTRAL
    assert fields(GeminiInteractionsGeneration) == expected


def test_every_provider_has_client_and_generation_options_and_others_are_refused() -> None:
    for provider in PROVIDER_NAMES:
        assert "max_retries" in client_options(provider).model_fields
        assert "temperature" in generation_options(provider).model_fields
    with pytest.raises(ValueError, match="unknown model provider 'anthropic'"):
        client_options("anthropic")


def test_an_unknown_key_is_named_with_the_nearest_and_the_known_ones_at_its_place() -> None:
    with pytest.raises(ValidationError) as caught:
        checked(client_options("openai"), {"retry": {"jiter": 0.1}, "api_kye": "sk-x"}, "option")
    errors = {e["loc"]: e["msg"] for e in caught.value.errors()}
    assert errors[("retry", "jiter")].startswith(
        "unknown retry setting 'jiter'; did you mean 'jitter'? (known: initial_delay_s,"
    )
    assert errors[("api_kye",)].startswith("unknown option 'api_kye'; did you mean 'api_key'?")
    assert "sk-x" not in str(caught.value)


def test_extra_body_fields_go_into_an_openai_request_as_they_are() -> None:
    model = create_model(
        "openai",
        "m",
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        generation={"max_tokens": 5, "extra_body": {"top_k": 20, "min_p": 0.1}},
    )
    request = model.build_request([ChatMessage.user("hi")])
    assert (request["max_completion_tokens"], request["top_k"], request["min_p"]) == (5, 20, 0.1)
    assert "extra_body" not in request
