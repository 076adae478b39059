"""`upload_media` in a job spec: on the model and each fallback, reaching each adapter with
the job's media store, and clear refusals where a wire has no file API (file, line, field)."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_files import write_spec

from streamagents.connectors.providers.failover import FailoverModel
from streamagents.connectors.providers.file_uploads import UploadMedia
from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import SpecError, check_runnable, load_spec
from streamagents.operators.agent.runtime_parts import runtime_parts

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
ENV = {"GEMINI_API_KEY": "g-key", "OPENAI_API_KEY": "o-key"}


def docs_example() -> str:
    page = DOCS.read_text()
    return page.split("<!-- upload-example -->")[1].split("```yaml\n")[1].split("```")[0]


def test_the_docs_upload_example_reaches_the_model_and_its_fallback_with_the_media_store(
    tmp_path: Path,
) -> None:
    loaded = load_spec(write_spec(tmp_path, docs_example()), ENV)
    check_runnable(loaded)
    config = agent_config(loaded, model_spec(loaded.model)).model_copy(
        update={"media_store": str(tmp_path / "media")}
    )
    model = runtime_parts(config).model
    assert isinstance(model, FailoverModel)
    adapters = [getattr(link.model, "model", link.model) for link in model.links]  # worker or not
    settings = [(a.upload_media, a.uploads.index.root) for a in adapters]
    assert settings == [
        (UploadMedia(min_bytes=1_000_000), str(tmp_path / "media")),
        (UploadMedia(min_bytes=500_000), str(tmp_path / "media")),
    ]
    assert adapters[0].uploads.index.endpoint.startswith("gemini-files https://")
    assert adapters[1].uploads.index.endpoint == "openai-files https://api.openai.com/v1"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("provider: gemini\n", "provider: gemini-interactions\n"),
            "upload_media: the gemini-interactions wire refers to no uploaded files",
        ),
        (
            ('options: {api_key: "${GEMINI_API_KEY}"', "options: {vertexai: true, project: p"),
            "upload_media: Vertex AI has no Files API",
        ),
        (("min_bytes: 1000000", "min_bytes: 0"), "agent.model.upload_media.min_bytes"),
        (
            ('options: {api_key: "${GEMINI_API_KEY}"', "options: {upload_media: {min_bytes: 5}"),
            "upload_media goes in the model's `upload_media`",
        ),
    ],
)
def test_upload_media_is_refused_where_it_cannot_apply(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    text = docs_example().replace(*change, 1)
    assert text != docs_example()
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, text), ENV)
    assert expected in str(caught.value) and "agent.model" in str(caught.value)
