"""Test doubles for provider wires. Nothing here is a model: it replays scripted replies."""

from streamagents.connectors.testing.stub_server import (
    LoopbackStubServer,
    RecordedRequest,
    StubReply,
)

__all__ = ["LoopbackStubServer", "RecordedRequest", "StubReply"]
