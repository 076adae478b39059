"""`redact_secrets`: credentials go, JSON stays JSON, ordinary text stays as it is; `scrub`
removes a known key as a whole token."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.serde.safe_text import is_credential_name, redact_secrets, scrub

_GOOGLE_KEY = "AIzaSyD-" + "k" * 31


@pytest.mark.parametrize(
    "arguments",
    [
        {"api_key": "abcdefghijklmnop1234"},
        {"api_key": "abcdefghijklmnop1234=="},
        {"api_key": 12345678901234},  # a number: main wrote `"api_key": [REDACTED]`, not JSON
        {"password": "hunter2-hunter2 and more words"},
        {"secret_key": "short!"},
        {"client_secret": 'with "quotes" inside'},
        {"access_token": "abcdefghijklmnop1234", "city": "Oslo"},
        {"body": json.dumps({"api_key": "abcdefghijklmnop1234"})},
        {"headers": {"x-goog-api-key": _GOOGLE_KEY, "Authorization": "Bearer abcdefghijklmnop"}},
    ],
)
def test_redaction_inside_json_keeps_it_json_and_removes_the_value(arguments: dict) -> None:
    for separators in ((",", ":"), (", ", ": ")):
        text = json.dumps(arguments, separators=separators)
        redacted = redact_secrets(text)
        json.loads(redacted)  # still JSON
        for secret in (
            "abcdefghijklmnop",
            "hunter2",
            "short!",
            "quotes",
            "kkkkkkkkkk",
            "123456789",
        ):
            assert secret not in redacted, redacted
        assert "[REDACTED]" in redacted


def test_a_credential_inside_an_escaped_json_string_is_redacted_and_stays_json() -> None:
    text = json.dumps({"body": json.dumps({"api_key": "abcdefghijklmnop1234"})})
    assert json.loads(json.loads(redact_secrets(text))["body"]) == {"api_key": "[REDACTED]"}


@pytest.mark.parametrize(
    "text",
    [
        "Primary key: ORDER-12345678-ABCD",
        "Sort key: customer-12345678",
        "monkey: abcdefghijklmnopq",
        "the key: ORDER-2024-000123 is the order id",
        '{"key": "customer-123456789", "token_count": "1234567890123"}',
    ],
)
def test_ordinary_text_with_the_word_key_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("x-goog-api-key: " + _GOOGLE_KEY, "x-goog-api-key: [REDACTED]"),
        ("API key: abcdefghijklmnop", "API key: [REDACTED]"),
        ("GEMINI_API_KEY=abcdefghijklmnop", "GEMINI_API_KEY=[REDACTED]"),
        ("password='abcdefghijklmnop'", "password='[REDACTED]'"),
        ("https://x/v1?key=abcdefghijklmnopqrst&alt=sse", "https://x/v1?key=[REDACTED]&alt=sse"),
        ("Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer [REDACTED]"),
        ("my key is sk-proj-" + "s3cr3t" * 6, "my key is [REDACTED]"),
    ],
)
def test_credentials_are_redacted_keeping_their_name(text: str, kept: str) -> None:
    assert redact_secrets(text) == kept


def test_credential_names() -> None:
    assert is_credential_name("api_key") and is_credential_name("X-Goog-Api-Key")
    assert is_credential_name("client_secret") and is_credential_name("db_password")
    assert not is_credential_name("thought_signature") and not is_credential_name("key")


_JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30)),
    lambda inner: (
        st.dictionaries(
            st.one_of(
                st.sampled_from(["api_key", "password", "secret", "key", "token"]),
                st.text(max_size=10),
            ),
            inner,
            max_size=4,
        )
        | st.lists(inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSONISH, compact=st.booleans())
def test_redacted_json_is_always_json(value: object, compact: bool) -> None:
    text = json.dumps(value, separators=(",", ":") if compact else None)
    json.loads(redact_secrets(text))


def _whole(secret: str) -> str:
    return rf"(?<![A-Za-z0-9_\-]){re.escape(secret)}(?![A-Za-z0-9_\-])"


def test_a_short_api_key_is_scrubbed_as_a_whole_token_not_inside_words() -> None:
    text = "429 rate_limit_exceeded: key x is over its quota (x)"
    assert (
        scrub(text, ["x"])
        == "429 rate_limit_exceeded: key [redacted] is over its quota ([redacted])"
    )


def test_a_long_api_key_is_scrubbed_even_inside_a_longer_token() -> None:
    key = "sk-test-0123456789abcdef"
    assert scrub(f"url?key={key}&x, prefix{key}suffix", [key]) == (
        "url?key=[redacted]&x, prefix[redacted]suffix"
    )


@given(
    st.text(alphabet="abxk1_- .:", max_size=40),
    st.sampled_from(["x", "ab", "k-1", "b_x"]),
)
@settings(max_examples=300)
def test_scrub_leaves_no_whole_short_secret_and_touches_nothing_else(
    text: str, secret: str
) -> None:
    scrubbed = scrub(text, [secret])
    assert re.search(_whole(secret), scrubbed) is None
    if re.search(_whole(secret), text) is None:
        assert scrubbed == text


_PIECES = st.sampled_from(
    ["key", "Key", "api", "API_KEY", "api key", "apiKey", "api-key", "?key", "&key", "=", ":",
     '"', "'", " ", "x" * 12, "secret", "Token", "passwd", "sk-", "AIza", "bearer ", "\\\"",
     "0123456789abcdef", "customer", "{", "}", ","]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_the_first_look_never_skips_text_the_secret_pattern_would_change(text: str) -> None:
    from streamagents.serde.safe_text import _SECRET, _redact_match

    assert redact_secrets(text) == _SECRET.sub(_redact_match, text)


def test_a_json_field_named_key_takes_the_fast_path_and_stays_as_it_is() -> None:
    line = json.dumps({"id": "in-1", "key": "customer-42", "text": "where is my order?"})
    assert redact_secrets(line) is line
