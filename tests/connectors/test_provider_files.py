"""The provider-file mapping beside the media store: what is put is read back whole, per
endpoint, from another index over the same root; a damaged object reads as none."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from streamagents.connectors.provider_files import ProviderFile, ProviderFileIndex

DIGEST = hashlib.sha256(b"screenshot").hexdigest()

files = st.builds(
    ProviderFile,
    reference=st.text(min_size=1, max_size=80),
    name=st.text(min_size=1, max_size=40),
    mime_type=st.sampled_from(["image/png", "application/pdf", "video/mp4"]),
    size_bytes=st.integers(min_value=1, max_value=2**40),
    expires_at=st.none() | st.floats(min_value=0, max_value=4e9),
)


@settings(max_examples=40, deadline=None)
@given(first=files, second=files)
def test_the_last_file_put_is_read_back_whole_by_another_index_over_the_root(
    tmp_path_factory: object, first: ProviderFile, second: ProviderFile
) -> None:
    root = str(tmp_path_factory.mktemp("media"))  # type: ignore[attr-defined]
    ProviderFileIndex(root, "gemini-files https://g/").put(DIGEST, first)
    ProviderFileIndex(root, "gemini-files https://g/").put(DIGEST, second)
    assert ProviderFileIndex(root, "gemini-files https://g/").get(DIGEST) == second
    assert ProviderFileIndex(root, "openai-files https://o/v1").get(DIGEST) is None


def test_a_damaged_mapping_reads_as_none_and_is_replaced(tmp_path: Path) -> None:
    index = ProviderFileIndex(str(tmp_path), "openai-files https://o/v1")
    file = ProviderFile("file-1", "file-1", "image/png", 10, None)
    index.put(DIGEST, file)
    (stored,) = (tmp_path / "provider-files").rglob("*.json")
    stored.write_text('{"file": {"reference": "file-1"')
    assert index.get(DIGEST) is None
    index.put(DIGEST, file)
    assert index.get(DIGEST) == file
    assert list((tmp_path / "provider-files").rglob(".tmp-*")) == []
