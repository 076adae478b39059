"""`streamagents eventlog view`: the HTML run viewer, read as text and seen in a real browser.

The browser test loads the page from disk in Debian's headless chromium (installed by
.ci/run) and checks what a person sees: the runs, each run's timeline in order, every image
decoded, the hostile text shown as text with no script run, no console errors.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from headless_browser import HeadlessChromium, chromium_binary
from sample_runs import HOSTILE, SECRET, SampleLog, write_sample_log

from streamagents.connectors.eventlog import read_events
from streamagents.jobs.cli.main import main
from streamagents.jobs.viewer.page import MediaSource, render_runs
from streamagents.serde.chat import GroundingSource, ServerToolEvidence, TokenUsage
from streamagents.serde.events import new_event

ALICE_STEPS = [
    "input",
    "chat_request",
    "chat_response",
    "tool_request",
    "tool_response",
    "chat_request",
    "chat_response",
    "output",
]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleLog:
    return write_sample_log(tmp_path_factory.mktemp("sample"))


def _view(sample: SampleLog, out: Path, *extra: str) -> str:
    if "--media" not in extra:
        extra = (*extra, "--media", str(sample.media_root))
    assert main(["eventlog", "view", str(sample.log_dir), "--out", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8")


def test_page_escapes_untrusted_text_and_embeds_the_images(
    sample: SampleLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = _view(sample, tmp_path / "run.html")
    assert "wrote 2 runs to" in capsys.readouterr().out
    assert HOSTILE not in page
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert "<script" not in page.lower()
    assert "script-src 'none'" in page
    assert SECRET not in page
    assert page.count('src="data:image/png;base64,') == 2
    assert not (tmp_path / "run.html.media").exists()


def test_past_the_embed_budget_media_are_files_next_to_the_page(
    sample: SampleLog, tmp_path: Path
) -> None:
    page = _view(sample, tmp_path / "run.html", "--embed-limit-mb", "0")
    assert "data:image" not in page
    files = sorted(p.name for p in (tmp_path / "run.html.media").iterdir())
    assert files == sorted(f"{ref.sha256}.png" for ref in (sample.user_image, sample.tool_image))
    assert f'src="run.html.media/{sample.user_image.sha256}.png"' in page


def test_missing_or_corrupt_media_show_a_placeholder_naming_the_ref(
    sample: SampleLog, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(sample.media_root, store)
    digest = sample.user_image.sha256
    (store / "sha256" / digest[:2] / digest).unlink()
    tool = sample.tool_image.sha256
    (store / "sha256" / tool[:2] / tool).write_bytes(b"\x89PNG damaged")
    page = _view(sample, tmp_path / "run.html", "--media", str(store))
    assert f'class="media-missing" data-ref="{digest}"' in page
    assert f'class="media-missing" data-ref="{tool}"' in page
    assert "data:image" not in page


def test_filters_and_replayed_steps(sample: SampleLog, tmp_path: Path) -> None:
    page = _view(sample, tmp_path / "new" / "bob.html", "--key", "bob")
    assert 'data-run="run-bob"' in page and 'data-run="run-alice"' not in page
    page = _view(sample, tmp_path / "alice.html", "--run", "run-alice")
    assert 'data-run="run-bob"' not in page
    events = list(read_events(sample.log_dir, typed=True))
    store = str(sample.media_root)
    once, _ = render_runs(events, MediaSource(tmp_path / "a.html", store))
    twice, _ = render_runs(events + events[2:6], MediaSource(tmp_path / "b.html", store))
    assert once == twice


@pytest.fixture(scope="module")
def browser() -> Iterator[HeadlessChromium]:
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it with apt")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with HeadlessChromium(binary) as chromium:
        yield chromium


_SEEN = """(() => ({
  title: document.title,
  runs: [...document.querySelectorAll('#runs tr.run-row')].map(r => r.dataset.run),
  steps: Object.fromEntries([...document.querySelectorAll('section.run')].map(s =>
      [s.dataset.run, [...s.querySelectorAll('li.step')].map(li => li.dataset.type)])),
  images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]),
  scripts: document.scripts.length,
  text: document.body.innerText,
}))()"""


@pytest.mark.parametrize("embed", ["embedded", "files"])
def test_a_browser_shows_the_runs_their_steps_and_images(
    sample: SampleLog, tmp_path: Path, browser: HeadlessChromium, embed: str
) -> None:
    out = tmp_path / "run.html"
    _view(sample, out, *(["--embed-limit-mb", "0"] if embed == "files" else []))
    browser.errors.clear()
    browser.open(out.as_uri())
    seen = browser.evaluate(_SEEN)
    assert seen["title"] == "streamagents runs (2)"  # the hostile text did not retitle it
    assert seen["runs"] == ["run-alice", "run-bob"]
    assert seen["steps"]["run-alice"] == ALICE_STEPS
    assert seen["steps"]["run-bob"] == [
        "input",
        "chat_request",
        "chat_response",
        "tool_request",
        "tool_response",
        "budget_exceeded",
        "output",
    ]
    assert sorted(seen["images"]) == [[True, 32, 32], [True, 64, 48]]  # both decoded
    assert seen["scripts"] == 0
    assert "<script>document.title='pwned'</script>" in seen["text"]
    assert "max_tool_calls=1" in seen["text"]
    assert "tokens 420 / 35 · $0.0024" in seen["text"]  # alice's summary: two calls' cost
    assert browser.errors == []
    if embed == "embedded" and os.environ.get("STREAMAGENTS_DOCS_SCREENSHOT"):
        browser.screenshot(Path(os.environ["STREAMAGENTS_DOCS_SCREENSHOT"]))


def test_server_tool_evidence_shows_its_sources_as_links_and_never_a_script_link(
    tmp_path: Path,
) -> None:
    ids = {"job_id": "job", "key": "k", "run_id": "run-k"}
    search = ServerToolEvidence(
        tool="google_search",
        queries=["<b>hours</b>"],
        sources=[
            GroundingSource(uri="https://example.org/hours?a=1&b=2", title="Hours"),
            GroundingSource(uri="javascript:alert(1)", title="evil"),
        ],
    )
    code = ServerToolEvidence(tool="code_execution", code="print('<x>')", output="<x>")
    events = [
        new_event(
            "chat_response",
            sequence=1,
            usage=TokenUsage(input_tokens=900, output_tokens=9, cached_tokens=800),
            **ids,
        ),
        new_event("server_tool", sequence=2, evidence=[search, code], **ids),
    ]
    page, runs = render_runs(events, MediaSource(tmp_path / "page.html"))
    assert runs == 1
    assert (
        '<a href="https://example.org/hours?a=1&amp;b=2" rel="noreferrer noopener">Hours</a>'
        in page
    )
    assert 'href="javascript' not in page and "evil (javascript:alert(1))" in page
    assert "&lt;b&gt;hours&lt;/b&gt;" in page and "print(&#x27;&lt;x&gt;&#x27;)" in page
    assert "800 cached" in page
