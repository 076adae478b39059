"""Closes the engine harnesses a test made (their runners' event loops)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_harness import OPEN


@pytest.fixture(autouse=True)
def _close_harnesses() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()
