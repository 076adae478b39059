"""A media store's root is shown without the credentials it may carry."""

from __future__ import annotations

import pytest

from streamagents.connectors.media import MediaNotFoundError, MediaStore
from streamagents.serde.messages import MediaRef

_ROOT = "mock://AKIDEXAMPLE:wJalrXUtnFEMI-s3cr3t@bucket/media?session_token=tok-123456789abc"


def test_errors_and_repr_name_the_store_without_its_credentials() -> None:
    store = MediaStore(_ROOT)
    ref = MediaRef(sha256="0" * 64, mime_type="image/png", size_bytes=1)
    with pytest.raises(MediaNotFoundError) as caught:
        store.get(ref)
    for shown in (str(caught.value), repr(store)):
        assert "wJalrXUtnFEMI" not in shown and "AKIDEXAMPLE" not in shown
        assert "tok-123456789abc" not in shown
        assert "mock://bucket/media" in shown
