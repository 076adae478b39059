"""The loopback stub's own abilities that the fault tests rely on."""

from __future__ import annotations

import http.client

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer, StubReply


def test_a_dropped_reply_closes_the_connection_without_a_status_line() -> None:
    with LoopbackStubServer() as stub:
        stub.script(StubReply(drop=True), StubReply({"ok": True}))
        first = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=5)
        first.request("POST", "/v1/x", body=b"{}", headers={"Content-Type": "application/json"})
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            first.getresponse()
        first.close()

        second = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=5)
        second.request("POST", "/v1/x", body=b"{}", headers={"Content-Type": "application/json"})
        reply = second.getresponse()
        assert (reply.status, reply.read()) == (200, b'{"ok": true}')
        second.close()
        assert [r.path for r in stub.requests] == ["/v1/x", "/v1/x"]
