"""What a key that stays away leaves in keyed state once its memory TTL has passed."""

from __future__ import annotations

from pathlib import Path

from engine_harness import harness

from streamagents.operators.agent.config import MemoryConfig
from streamagents.testing import EchoTestModel


def test_a_key_whose_run_succeeded_leaves_nothing(tmp_path: Path) -> None:
    """After the TTL the history, its expiry and the key's numbering leave state."""
    h = harness(tmp_path, EchoTestModel(), memory=MemoryConfig(ttl_seconds=60))
    h.send("a", '{"key": "a", "text": "no id"}')
    h.settle_all()
    assert "history" in h.port.state_of("a")
    h.advance(400_000)
    assert h.port.state_of("a") == {}
    assert h.count("histories_expired") == 1


def test_a_key_whose_run_failed_leaves_nothing(tmp_path: Path) -> None:
    """A key whose only run failed (its call broke: a dead letter) leaves nothing either."""
    h = harness(tmp_path, EchoTestModel(), memory=MemoryConfig(ttl_seconds=60))
    h.send("a", '{"key": "a", "text": "no id"}')
    h.fail("a", RuntimeError("the call broke"))
    h.advance(1000)
    assert not h.outputs() and len(h.dead_letters()) == 1
    h.advance(400_000)
    assert h.port.state_of("a") == {}
