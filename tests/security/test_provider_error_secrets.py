"""A provider error carries none of the model's credentials, whichever option held them."""

from __future__ import annotations

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply
from streamagents.connectors.providers import BadRequest, create_model
from streamagents.connectors.providers.errors import error_for_status
from streamagents.serde.chat import ChatMessage

_HEADER_VALUE = "hdr-9f3Kq2"
_PASSWORD = "pw-7e3d1b"
_KEY = "key-5Lm8Zp"


def test_an_error_echoing_the_key_and_a_header_value_keeps_them_out(
    stub: LoopbackStubServer,
) -> None:
    echo = f"denied: key {_KEY}, proxy header {_HEADER_VALUE}"
    stub.script(StubReply({"error": {"message": echo, "code": "denied"}}, status=403))
    model = create_model(
        "openai",
        "m",
        api_key=_KEY,
        base_url=stub.url + "/v1",
        default_headers={"X-Proxy-Authorization": _HEADER_VALUE},
        max_retries=0,
    )
    with pytest.raises(BadRequest) as caught:
        model.chat([ChatMessage.user("hi")])
    assert str(caught.value) == "openai 403 denied: denied: key [redacted], proxy header [redacted]"
    sent = {name.lower(): value for name, value in stub.requests[0].headers.items()}
    assert sent["x-proxy-authorization"] == _HEADER_VALUE


def test_an_error_echoing_the_user_info_of_the_base_url_keeps_it_out(
    stub: LoopbackStubServer,
) -> None:
    echo = f"login svc with {_PASSWORD} refused"
    stub.script(StubReply({"error": {"code": 403, "message": echo, "status": "DENIED"}}, 403))
    base_url = stub.url.replace("http://", f"http://svc:{_PASSWORD}@")
    model = create_model("gemini", "m", api_key=_KEY, base_url=base_url, max_retries=0)
    with pytest.raises(BadRequest) as caught:
        model.chat([ChatMessage.user("hi")])
    assert _PASSWORD not in str(caught.value)
    assert "login [redacted] with [redacted] refused" in str(caught.value)


def test_a_token_a_server_names_in_its_message_is_redacted_whatever_the_wire() -> None:
    error = error_for_status(502, "upstream refused Bearer eyJhbGciOiJIUzI1", provider="p")
    assert str(error) == "p 502: upstream refused Bearer [REDACTED]"
