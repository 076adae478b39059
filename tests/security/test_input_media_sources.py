"""An input line may point only where its source allows: no store refs unless the source is
trusted, URLs only of the allowed schemes and hosts (default: https, any host)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamagents.connectors.media import MediaStore
from streamagents.jobs.graph import agent_config
from streamagents.jobs.spec import SpecError, load_spec
from streamagents.operators.agent.config import AgentConfig, InputMedia, ModelSpec
from streamagents.operators.flink.parse_records import ParseRecords
from streamagents.operators.flink.side_outputs import DEAD_LETTERS_TAG

PNG = b"\x89PNG\r\n\x1a\n" + b"\x02" * 64


def _parse(store: Path, line: dict[str, Any], media: InputMedia | None = None) -> list[Any]:
    config = AgentConfig(
        model=ModelSpec(provider="gemini", model="m"),
        media_store=str(store),
        **({} if media is None else {"input_media": media}),
    )
    function = ParseRecords(config, "inputs")
    function.open(None)
    try:
        return list(function.process_element(json.dumps(line), None))
    finally:
        function.close()


def _image(**source: Any) -> dict[str, Any]:
    return {
        "key": "k",
        "text": "look",
        "parts": [{"kind": "image", "mime_type": "image/png", **source}],
    }


def _refused(out: list[Any], error_type: str) -> str:
    [(tag, letter)] = out
    assert tag == DEAD_LETTERS_TAG
    record = json.loads(letter)
    assert record["stage"] == "parse" and record["error_type"] == error_type
    return record["reason"]


def test_a_ref_to_another_customers_object_is_refused(tmp_path: Path) -> None:
    ref = MediaStore(str(tmp_path / "media")).put(PNG, "image/png")  # someone else's image
    line = _image(ref=ref.model_dump(mode="json"))
    reason = _refused(_parse(tmp_path / "media", line), "MediaSourceRefused")
    assert "media store refs" in reason and ref.sha256 not in reason
    [(key, _)] = _parse(tmp_path / "media", line, InputMedia(store_refs=True))  # trusted
    assert key == "k"


@pytest.mark.parametrize(
    "url",
    [
        "gs://project-bucket/secret.png",
        "http://169.254.169.254/latest/meta-data",
        "file:///etc/passwd",
    ],
)
def test_a_url_of_another_scheme_is_refused(tmp_path: Path, url: str) -> None:
    reason = _refused(_parse(tmp_path / "media", _image(url=url)), "MediaSourceRefused")
    assert "scheme" in reason and "https" in reason


def test_https_urls_pass_and_hosts_follow_their_allow_list(tmp_path: Path) -> None:
    ok = _image(url="https://cdn.example.com/a.png")
    assert _parse(tmp_path / "m", ok)[0][0] == "k"
    only = InputMedia(url_hosts=["*.example.com", "images.partner.test"])
    assert _parse(tmp_path / "m", ok, only)[0][0] == "k"
    assert (
        _parse(tmp_path / "m", _image(url="https://images.partner.test/b.png"), only)[0][0] == "k"
    )
    other = _image(url="https://evil.test/x.png")
    assert "host" in _refused(_parse(tmp_path / "m", other, only), "MediaSourceRefused")
    lookalike = _image(url="https://example.com.evil.test/x.png")
    _refused(_parse(tmp_path / "m", lookalike, only), "MediaSourceRefused")
    wider = InputMedia(url_schemes=["https", "gs"])
    assert _parse(tmp_path / "m", _image(url="gs://bucket/a.png"), wider)[0][0] == "k"


def test_media_rules_belong_to_the_input_source(tmp_path: Path) -> None:
    spec_text = (
        Path(__file__).resolve().parents[2] / "jobs/examples/support_tickets.yaml"
    ).read_text()
    spec_text = spec_text.replace(
        "  files:\n", "  media: {store_refs: true, url_schemes: [https, gs]}\n  files:\n", 1
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    loaded = load_spec(spec)
    assert loaded.spec.source.media == InputMedia(store_refs=True, url_schemes=("https", "gs"))
    assert agent_config(loaded, loaded.model).input_media.store_refs  # to the parse step


def test_media_rules_on_the_approvals_source_are_refused(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "jobs/examples/support_tickets.yaml"
    text = example.read_text().replace(
        "sinks:\n", "sinks:\n  approval_requests: {path: out/requests}\n", 1
    )
    text += "approvals:\n  files: {path: decisions}\n  media: {store_refs: true}\n"
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError, match=r"approvals\.media has no effect"):
        load_spec(spec)
