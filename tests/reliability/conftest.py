"""The reliability suite: every test here runs real jobs, so it is both `reliability` and `e2e`;
the tests that kill TaskManagers take the `cluster` fixture (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test of this folder `reliability` and `e2e` (the fast subset skips it)."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.e2e)
