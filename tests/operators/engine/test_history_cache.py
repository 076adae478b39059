"""The engine's cache of decoded histories: same bytes as `StoredHistory`, never stale."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.operators.engine.stored_history import HistoryCache, StoredHistory
from streamagents.serde.messages import ChatMessage, ToolCall

_messages = st.lists(
    st.one_of(
        st.builds(ChatMessage.user, st.text(max_size=40)),
        st.builds(
            lambda text, args: ChatMessage(
                role="assistant",
                content=text,
                tool_calls=[ToolCall(id="c1", name="lookup", arguments=args)],
            ),
            st.text(max_size=20),
            st.dictionaries(st.text(max_size=5), st.integers() | st.none() | st.text(max_size=5)),
        ),
    ),
    max_size=6,
)


@settings(deadline=None)  # a property of the bytes, not of time: no deadline under load
@given(kept=_messages, added=_messages, drop=st.integers(0, 6))
def test_encoding_through_the_cache_writes_exactly_what_stored_history_writes(
    kept: list[ChatMessage], added: list[ChatMessage], drop: int
) -> None:
    cache = HistoryCache()
    first = cache.encode("k", 1, kept)
    assert first == StoredHistory(updated_ms=1, messages=kept).encode()
    # The next run: the kept messages come back from the cache, new ones join, the oldest
    # may be trimmed; the messages dumped before are reused, the bytes stay the same.
    again = [*cache.decode("k", first).messages, *added][drop:]
    assert cache.encode("k", 2, again) == StoredHistory(updated_ms=2, messages=again).encode()


def test_a_history_the_state_no_longer_holds_is_decoded_from_the_state() -> None:
    cache = HistoryCache()
    ours = cache.encode("k", 1, [ChatMessage.user("cached")])
    assert cache.decode("k", ours).messages == [ChatMessage.user("cached")]
    # Keyed state holds other bytes (a restore from an older checkpoint): they win.
    other = StoredHistory(updated_ms=7, messages=[ChatMessage.user("restored")]).encode()
    decoded = cache.decode("k", other)
    assert (decoded.updated_ms, decoded.messages) == (7, [ChatMessage.user("restored")])


def test_the_cache_keeps_at_most_max_keys_histories() -> None:
    cache = HistoryCache(max_keys=2)
    data = {key: cache.encode(key, 1, [ChatMessage.user(key)]) for key in ("a", "b", "c")}
    assert len(cache._entries) == 2
    assert list(cache._entries) == ["b", "c"]  # the least recently used went first
    assert cache.decode("a", data["a"]).messages == [ChatMessage.user("a")]  # decoded again
