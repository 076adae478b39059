"""The media store: content addressing, idempotency, atomicity, integrity, offload/resolve."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamagents.connectors.media import (
    InvalidMediaRefError,
    MediaIntegrityError,
    MediaNotFoundError,
    MediaStore,
)
from streamagents.serde.messages import ChatMessage, ImagePart, MediaRef, TextPart

BIG = os.urandom(70_000)
SMALL = b"tiny image"


def objects(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_put_is_content_addressed(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    ref = store.put(BIG, "image/png")
    assert ref.sha256 == hashlib.sha256(BIG).hexdigest()
    assert (ref.mime_type, ref.size_bytes) == ("image/png", len(BIG))
    assert store.get(ref) == BIG
    assert store.exists(ref)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2048), repeats=st.integers(1, 4))
def test_put_is_idempotent(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, repeats: int
) -> None:
    root = tmp_path_factory.mktemp("store")
    store = MediaStore(str(root))
    refs = {store.put(data, "image/png") for _ in range(repeats)}
    assert len(refs) == 1
    assert len(objects(root)) == 1
    assert store.get(refs.pop()) == data


def test_put_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    store.put(BIG, "image/png")
    store.put(SMALL, "image/png")
    names = [p.name for p in objects(tmp_path)]
    assert sorted(names) == sorted(
        [hashlib.sha256(BIG).hexdigest(), hashlib.sha256(SMALL).hexdigest()]
    )


def test_a_half_written_temporary_object_is_never_served(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    digest = hashlib.sha256(BIG).hexdigest()
    ref = MediaRef(sha256=digest, mime_type="image/png", size_bytes=len(BIG))
    folder = tmp_path / "sha256" / digest[:2]
    folder.mkdir(parents=True)
    (folder / f".tmp-{digest[:16]}-crashed").write_bytes(BIG[:100])
    assert not store.exists(ref)
    with pytest.raises(MediaNotFoundError):
        store.get(ref)
    assert store.put(BIG, "image/png").sha256 == digest
    assert store.get(ref) == BIG


def test_get_of_a_missing_object_is_a_clear_error(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    ref = MediaRef(sha256="0" * 64, mime_type="image/png", size_bytes=3)
    with pytest.raises(MediaNotFoundError, match="has no object sha256=0000"):
        store.get(ref)


def test_get_detects_corrupt_bytes(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    ref = store.put(BIG, "image/png")
    [path] = objects(tmp_path)
    path.write_bytes(b"tampered")
    with pytest.raises(MediaIntegrityError, match="is corrupt"):
        store.get(ref)


@pytest.mark.parametrize("digest", ["../" * 10 + "etc/passwd", "A" * 64, "ab" * 31, ""])
def test_refs_that_are_not_64_hex_characters_are_refused(tmp_path: Path, digest: str) -> None:
    store = MediaStore(str(tmp_path))
    forged = MediaRef.model_construct(sha256=digest, mime_type="image/png", size_bytes=1)
    with pytest.raises(InvalidMediaRefError, match="64 lowercase hex"):
        store.get(forged)
    with pytest.raises(InvalidMediaRefError):
        store.exists(forged)


def test_file_uri_and_plain_path_are_the_same_store(tmp_path: Path) -> None:
    by_path = MediaStore(str(tmp_path))
    by_uri = MediaStore(tmp_path.as_uri())
    ref = by_path.put(BIG, "image/png")
    assert by_uri.exists(ref)
    assert by_uri.get(ref) == BIG
    assert by_uri.put(BIG, "image/png") == ref
    other = by_uri.put(SMALL, "image/gif")
    assert by_path.get(other) == SMALL
    assert len(objects(tmp_path)) == 2


def test_offload_moves_only_media_above_the_threshold(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    message = ChatMessage.user(
        [
            TextPart(text="two pictures"),
            ImagePart(mime_type="image/png", data=BIG),
            ImagePart(mime_type="image/png", data=SMALL),
            ImagePart(mime_type="image/png", url="https://example.com/x.png"),
        ]
    )
    offloaded = store.offload(message, threshold_bytes=65536)
    sources = [p.source for p in offloaded.media]
    assert sources == ["ref", "data", "url"]
    assert offloaded.media[0].ref.size_bytes == len(BIG)
    assert offloaded.content == "two pictures"
    assert len(offloaded.model_dump_json()) < 2000
    assert message.media[0].data == BIG, "offload returns a copy"


def test_offload_of_the_same_media_twice_writes_one_object(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path))
    message = ChatMessage.user([ImagePart(mime_type="image/png", data=BIG)])
    first = store.offload(message)
    second = store.offload(message)
    assert first == second
    assert len(objects(tmp_path)) == 1


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "emptied"])
def test_put_of_the_right_bytes_repairs_a_damaged_object(tmp_path: Path, damage: str) -> None:
    store = MediaStore(str(tmp_path))
    ref = store.put(BIG, "image/png")
    (path,) = objects(tmp_path)
    damaged = {
        "flipped byte": BIG[:10] + bytes([BIG[10] ^ 0xFF]) + BIG[11:],
        "truncated": BIG[:100],
        "emptied": b"",
    }[damage]
    path.write_bytes(damaged)
    with pytest.raises(MediaIntegrityError):
        store.get(ref)
    assert store.put(BIG, "image/png") == ref
    assert store.get(ref) == BIG
    assert [p.name for p in objects(tmp_path)] == [ref.sha256]


def test_size_only_verification_repairs_a_truncated_object(tmp_path: Path) -> None:
    store = MediaStore(str(tmp_path), verify_existing="size")
    ref = store.put(BIG, "image/png")
    (path,) = objects(tmp_path)
    path.write_bytes(BIG[:100])
    store.put(BIG, "image/png")
    assert store.get(ref) == BIG


class _FailingFilesystem:
    """A store filesystem whose writes or renames fail, as a full disk or lost mount would."""

    def __init__(self, inner: object, fail: str) -> None:
        self._inner = inner
        self._fail = fail

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def open_output_stream(self, path: str) -> object:
        stream = self._inner.open_output_stream(path)  # type: ignore[attr-defined]
        if self._fail != "write":
            return stream
        fail = self._fail

        class Broken:
            def __enter__(self) -> Broken:
                return self

            def __exit__(self, *exc: object) -> None:
                stream.close()

            def write(self, data: bytes) -> None:
                stream.write(data[:10])
                raise OSError(f"{fail}: no space left on device")

        return Broken()

    def move(self, src: str, dest: str) -> None:
        if self._fail == "move":
            raise OSError("rename failed")
        self._inner.move(src, dest)  # type: ignore[attr-defined]


@pytest.mark.parametrize("fail", ["write", "move"])
def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, fail: str) -> None:
    store = MediaStore(str(tmp_path))
    store._fs = _FailingFilesystem(store._fs, fail)  # type: ignore[assignment]
    with pytest.raises(OSError):
        store.put(BIG, "image/png")
    leftovers = [p for p in (tmp_path / "sha256").rglob("*") if p.is_file()]
    assert leftovers == []
