"""The Kafka broker fixture's cluster ids: always a value `kafka-storage format -t` accepts."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st
from kafka_broker import cluster_id


@given(st.binary(min_size=16, max_size=16))
def test_a_cluster_id_never_begins_like_an_option_and_stays_16_bytes(raw: bytes) -> None:
    made = cluster_id(raw)
    assert made[0] not in "-_", made
    assert len(base64.urlsafe_b64decode(made + "==")) == 16


def test_bytes_that_gave_a_leading_dash_now_give_a_letter() -> None:
    raw = b"\xf8" + bytes(15)  # plain base64 of these begins with "-"
    assert base64.urlsafe_b64encode(raw).decode().startswith("-")
    assert cluster_id(raw)[0].isalpha()
