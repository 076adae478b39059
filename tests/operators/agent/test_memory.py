"""Short-term memory: bounded by messages and bytes, oldest first, whole runs, TTL."""

from __future__ import annotations

from streamagents.operators.agent.memory import history_expired, message_bytes, trim_history
from streamagents.serde.message_json import MessageJson
from streamagents.serde.messages import ChatMessage, ToolCall


def run_messages(n: int, size: int = 10) -> list[ChatMessage]:
    """One run: user, assistant with a tool call, tool result, final answer."""
    return [
        ChatMessage.user(f"question {n} " + "q" * size),
        ChatMessage(role="assistant", tool_calls=[ToolCall(id=f"c{n}", name="t")]),
        ChatMessage.tool_result(f"c{n}", "t", "r" * size),
        ChatMessage(role="assistant", content=f"answer {n}"),
    ]


def test_within_bounds_nothing_is_dropped() -> None:
    history = run_messages(1) + run_messages(2)
    result = trim_history(history, max_messages=8, max_bytes=10_000)
    assert result.messages == history
    assert not result.trimmed and result.dropped_messages == 0 and result.dropped_bytes == 0
    assert result.kept_bytes == sum(message_bytes(m) for m in history)


def test_max_messages_drops_oldest_first() -> None:
    history = run_messages(1) + run_messages(2) + run_messages(3)
    result = trim_history(history, max_messages=8, max_bytes=10**9)
    assert result.messages == history[4:]
    assert result.dropped_messages == 4
    assert result.dropped_bytes == sum(message_bytes(m) for m in history[:4])


def test_max_bytes_drops_oldest_until_it_fits() -> None:
    history = run_messages(1, 500) + run_messages(2, 500) + run_messages(3, 500)
    budget = sum(message_bytes(m) for m in history[4:]) + 10
    result = trim_history(history, max_messages=100, max_bytes=budget)
    assert result.messages == history[4:]
    assert result.kept_bytes <= budget


def test_history_never_starts_with_an_orphan_tool_result() -> None:
    history = run_messages(1) + run_messages(2)
    result = trim_history(history, max_messages=6, max_bytes=10**9)
    # dropping 2 messages would leave a tool result first: the rest of that run goes too
    assert result.messages == history[4:]
    assert result.messages[0].role == "user"


def test_zero_bounds_keep_nothing() -> None:
    history = run_messages(1)
    assert trim_history(history, max_messages=0, max_bytes=10**9).messages == []
    assert trim_history(history, max_messages=10, max_bytes=0).messages == []


def test_media_refs_count_as_refs_not_bytes() -> None:
    ref = {
        "sha256": "ab" * 32,
        "mime_type": "image/png",
        "size_bytes": 5_000_000,
    }
    message = ChatMessage.user([{"kind": "image", "mime_type": "image/png", "ref": ref}])
    assert message_bytes(message) < 500


def test_remembered_sizes_trim_as_computed_ones() -> None:
    """A runtime trims with remembered sizes; across runs, and past the memo's bound (so
    entries are dropped and computed again), every trim equals the computed one, and every
    remembered JSON is the message's."""
    memo = MessageJson(max_bytes=600)
    history: list[ChatMessage] = []
    for n in range(12):
        combined = [*history, *run_messages(n, size=5 * n)]
        remembered = trim_history(combined, max_messages=9, max_bytes=900, size=memo.size)
        computed = trim_history(combined, max_messages=9, max_bytes=900)
        assert remembered == computed
        assert [memo.size(m) for m in combined] == [message_bytes(m) for m in combined]
        assert [memo.data(m) for m in combined] == [m.model_dump_json().encode() for m in combined]
        history = remembered.messages
    assert remembered.trimmed


def test_ttl() -> None:
    assert not history_expired(1_000, 10_000_000, None)
    assert not history_expired(None, 10_000_000, 5)
    assert not history_expired(1_000, 5_999, 5)
    assert history_expired(1_000, 6_000, 5)
