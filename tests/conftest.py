"""Fixtures shared by the whole suite; test doubles and helpers live in `tests/support/`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamagents.connectors.loopback_stub import LoopbackStubServer


@pytest.fixture
def stub() -> Iterator[LoopbackStubServer]:
    """A loopback stub server on 127.0.0.1, stopped after the test."""
    with LoopbackStubServer() as server:
        yield server
