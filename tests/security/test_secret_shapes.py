"""The redaction patterns catch the common token shapes wherever a text is kept."""

from __future__ import annotations

import json

import pytest

from streamagents.serde.safe_text import redact_secrets

_SHAPES = {
    "basic auth header": ("Authorization: Basic dXNlcjpodW50ZXIyaHVudGVyMg==", "dXNlcjpodW50"),
    "url user info": ("GET https://alice:hunter2pass@example.com/x failed", "hunter2pass"),
    "url user info, kafka": ("sasl: kafka://bob:Zx9q!wer@broker:9092", "Zx9q!wer"),
    "aws access key id": ("key id AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE"),
    "aws secret key": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
    ),
    "github token": ("token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 sent", "ghp_aBcDe"),
    "github fine-grained": ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "11ABCDEFG"),
    "slack token": ("hook xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "xoxb-1234"),
    "jwt": (
        "id eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJzdWIiOiIx",
    ),
    "private key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1\nabc\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA1",
    ),
    "url query token": ("https://h.example/x?sig=abc&token=Q1w2E3r4T5y6U7i8", "Q1w2E3r4T5y6U7i8"),
    "url query signature": (
        "https://bucket.s3.amazonaws.com/o?X-Amz-Signature=9f8e7d6c5b4a39281706f5e4d3c2b1a0&a=1",
        "9f8e7d6c5b4a3928",
    ),
}


@pytest.mark.parametrize("name", sorted(_SHAPES))
def test_each_common_token_shape_is_redacted(name: str) -> None:
    text, secret = _SHAPES[name]
    redacted = redact_secrets(text)
    assert secret not in redacted
    assert "[REDACTED]" in redacted


def test_ordinary_text_and_urls_without_credentials_are_kept() -> None:
    text = "see https://example.com/docs?page=2 and user@example.com; key count 12"
    assert redact_secrets(text) == text


def test_a_private_key_cut_short_inside_json_leaves_valid_json() -> None:
    text = json.dumps({"tool": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN", "next": 1})
    assert json.loads(redact_secrets(text)) == {"tool": "[REDACTED]", "next": 1}
