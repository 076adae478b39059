"""The message model's rules: parts vs content, media sources, mime kinds, roles, JSON."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamagents.serde.messages import (
    AudioPart,
    ChatMessage,
    DocumentPart,
    ImagePart,
    MediaRef,
    TextPart,
    ToolCall,
    VideoPart,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
REF = MediaRef(sha256="ab" * 32, mime_type="image/png", size_bytes=12, uri="file:///m/ab")


def test_without_parts_content_is_the_message() -> None:
    message = ChatMessage(role="user", content="where is my order?")
    assert message.content == "where is my order?"
    assert message.text_parts() == [TextPart(text="where is my order?")]
    assert not message.is_empty


def test_with_parts_content_is_the_concatenation_of_text_parts() -> None:
    message = ChatMessage.user(
        [
            TextPart(text="look at "),
            ImagePart(mime_type="image/png", data=PNG),
            TextPart(text="this"),
        ]
    )
    assert message.content == "look at this"
    assert [p.kind for p in message.parts] == ["text", "image", "text"]


def test_explicit_content_that_disagrees_with_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="content: must equal the concatenation"):
        ChatMessage(role="user", content="other", parts=[TextPart(text="hello")])


def test_explicit_content_that_agrees_with_parts_is_accepted() -> None:
    message = ChatMessage(role="user", content="hello", parts=[TextPart(text="hello")])
    assert message.content == "hello"


def test_media_only_message_is_valid_and_not_empty() -> None:
    message = ChatMessage.user([ImagePart(mime_type="image/png", data=PNG)])
    assert message.content == ""
    assert message.has_media
    assert not message.is_empty


def test_base64_text_is_accepted_as_inline_data() -> None:
    standard = ImagePart(mime_type="image/png", data=base64.b64encode(PNG).decode())
    urlsafe = ImagePart(mime_type="image/png", data=base64.urlsafe_b64encode(PNG).decode())
    assert standard.data == PNG
    assert urlsafe.data == PNG


@pytest.mark.parametrize("bad", ["not base64!", "abc", "QUJD=x=="])
def test_malformed_base64_names_the_field_and_never_echoes_the_data(bad: str) -> None:
    with pytest.raises(ValueError, match="data: malformed base64") as info:
        ImagePart(mime_type="image/png", data=bad)
    assert bad not in str(info.value)


@pytest.mark.parametrize(
    "sources",
    [{}, {"data": PNG, "url": "https://example.com/a.png"}, {"url": "https://e/a.png", "ref": REF}],
)
def test_media_part_needs_exactly_one_source(sources: dict) -> None:
    with pytest.raises(ValueError, match="exactly one source among data, url, ref"):
        ImagePart(mime_type="image/png", **sources)


@pytest.mark.parametrize(
    ("part_type", "mime_type"),
    [
        (ImagePart, "image/png"),
        (ImagePart, "image/webp"),
        (AudioPart, "audio/wav"),
        (AudioPart, "audio/mpeg"),
        (VideoPart, "video/mp4"),
        (DocumentPart, "application/pdf"),
        (DocumentPart, "text/plain"),
        (DocumentPart, "text/csv"),
        (DocumentPart, "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        (DocumentPart, "application/vnd.oasis.opendocument.spreadsheet"),
        (DocumentPart, "application/msword"),
    ],
)
def test_mime_types_of_the_right_kind_are_accepted(part_type: type, mime_type: str) -> None:
    part = part_type(mime_type=mime_type, url="https://example.com/file")
    assert part.mime_type == mime_type


@pytest.mark.parametrize(
    ("part_type", "mime_type"),
    [
        (ImagePart, "audio/wav"),
        (AudioPart, "image/png"),
        (VideoPart, "audio/mp4"),
        (DocumentPart, "image/png"),
        (DocumentPart, "application/octet-stream"),
        (ImagePart, "png"),
    ],
)
def test_mime_type_of_the_wrong_kind_is_refused(part_type: type, mime_type: str) -> None:
    with pytest.raises(ValueError, match=f"mime_type: '{mime_type}' is not allowed in a"):
        part_type(mime_type=mime_type, url="https://example.com/file")


def test_mime_type_is_normalized_to_lower_case() -> None:
    assert ImagePart(mime_type=" Image/PNG ", data=PNG).mime_type == "image/png"


def test_url_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="url: must be an absolute URL"):
        ImagePart(mime_type="image/png", url="screenshot.png")


def test_media_in_a_system_message_is_refused() -> None:
    with pytest.raises(ValueError, match="a system message carries text only"):
        ChatMessage(role="system", parts=[ImagePart(mime_type="image/png", data=PNG)])


def test_tool_message_must_name_its_call() -> None:
    with pytest.raises(ValueError, match="tool_call_id: a tool message must name the call"):
        ChatMessage(role="tool", content="42")


def test_tool_calls_belong_to_assistant_messages() -> None:
    with pytest.raises(ValueError, match="tool_calls: only assistant messages"):
        ChatMessage(role="user", content="x", tool_calls=[ToolCall(id="1", name="f")])


def test_tool_result_carries_media_and_error_flag() -> None:
    message = ChatMessage.tool_result(
        "call-1",
        "screenshot",
        [TextPart(text="done"), ImagePart(mime_type="image/png", data=PNG)],
        is_error=False,
    )
    assert (message.role, message.tool_call_id, message.name) == ("tool", "call-1", "screenshot")
    assert message.content == "done"
    assert len(message.media) == 1


def test_repr_shows_size_and_source_but_never_the_bytes() -> None:
    part = ImagePart(mime_type="image/png", data=PNG)
    text = repr(ChatMessage.user([part]))
    assert f"<{len(PNG)} bytes>" in text
    assert "image/png" in text
    assert repr(PNG[:16])[2:-1] not in text
    assert base64.b64encode(PNG).decode()[:16] not in text


def test_validation_errors_never_quote_the_input() -> None:
    secretish = base64.b64encode(PNG).decode()
    with pytest.raises(ValueError) as info:
        AudioPart(mime_type="image/png", data=secretish)
    assert secretish[:20] not in str(info.value)


def test_ref_digest_must_be_64_hex_characters() -> None:
    with pytest.raises(ValueError, match="sha256"):
        MediaRef(sha256="../../etc/passwd", mime_type="image/png", size_bytes=1)


def test_thought_signature_bytes_survive_json() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={"q": 1}, metadata={"sig": b"\x00\xff"})
    message = ChatMessage(role="assistant", tool_calls=[call])
    restored = ChatMessage.model_validate_json(message.model_dump_json())
    assert restored.tool_calls[0].metadata["sig"] == b"\x00\xff"
    assert restored == message


# Property tests: the JSON round trip is lossless for any mix of parts.

_mime = {
    "image": ["image/png", "image/jpeg"],
    "audio": ["audio/wav", "audio/mpeg"],
    "video": ["video/mp4"],
    "document": ["application/pdf", "text/plain"],
}
_types = {"image": ImagePart, "audio": AudioPart, "video": VideoPart, "document": DocumentPart}


@st.composite
def media_parts(draw: st.DrawFn) -> object:
    kind = draw(st.sampled_from(sorted(_types)))
    mime_type = draw(st.sampled_from(_mime[kind]))
    source = draw(st.sampled_from(["data", "url", "ref"]))
    metadata = draw(st.dictionaries(st.text(max_size=5), st.binary(max_size=8) | st.integers()))
    if source == "data":
        value: object = draw(st.binary(max_size=256))
    elif source == "url":
        value = "https://example.com/" + draw(st.text("abc/._-", max_size=20))
    else:
        value = MediaRef(
            sha256=draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
            mime_type=mime_type,
            size_bytes=draw(st.integers(0, 10**9)),
        )
    return _types[kind](mime_type=mime_type, metadata=metadata, **{source: value})


parts_strategy = st.lists(
    st.one_of(st.builds(TextPart, text=st.text(max_size=30)), media_parts()), max_size=6
)


@given(parts=parts_strategy, role=st.sampled_from(["user", "assistant"]))
def test_json_round_trip_is_lossless(parts: list, role: str) -> None:
    message = ChatMessage(role=role, parts=parts, metadata={"trace": b"\x01", "n": 3})
    restored = ChatMessage.model_validate_json(message.model_dump_json())
    assert restored == message
    assert [type(p) for p in restored.parts] == [type(p) for p in parts]
