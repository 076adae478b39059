"""The docs stay true: links between README, CONTRIBUTING, docs/ and the code resolve, and
every `streamagents` import a page shows works."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
CODE_FOLDERS = (
    "serde",
    "connectors",
    "operators",
    "jobs",
    "testing",
    "tests",
    "benchmarks",
    "docker",
)

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_DOC_MENTION = re.compile(r"\b((?:docs/[\w./-]+|README|CONTRIBUTING)\.md)(#[\w-]+)?")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings define (duplicates get -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_target(page: Path, target: str) -> str | None:
    """Why `target` (a link written in `page`) does not resolve, or None when it does."""
    path_part, _, fragment = target.partition("#")
    destination = (page.parent / path_part).resolve() if path_part else page
    if not destination.exists():
        return f"{target}: no such file"
    if fragment and destination.suffix == ".md" and fragment not in anchors(destination):
        return f"{target}: no heading #{fragment} in {destination.relative_to(ROOT)}"
    return None


def test_the_docs_pages_exist() -> None:
    assert (ROOT / "docs").is_dir() and len(PAGES) >= 4


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_in_a_page_resolves(page: Path) -> None:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    targets = [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    problems = [p for t in targets if (p := broken_target(page, t)) is not None]
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


def test_every_doc_page_the_code_mentions_exists() -> None:
    problems = []
    for folder in CODE_FOLDERS:
        for source in sorted((ROOT / folder).rglob("*")):
            if source.suffix not in (".py", ".yaml", ".toml", ".sh", "") or not source.is_file():
                continue
            text = source.read_text(encoding="utf-8", errors="replace")
            for target, fragment in _DOC_MENTION.findall(text):
                problem = broken_target(ROOT / "README.md", target + fragment)
                if problem is not None:
                    problems.append(f"{source.relative_to(ROOT)}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_anchor_rule_matches_githubs() -> None:
    assert anchor("The agent operator: `agent_stream` in your own PyFlink job") == (
        "the-agent-operator-agent_stream-in-your-own-pyflink-job"
    )
    assert anchor("Errors and retries") == "errors-and-retries"


_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def documented_imports() -> list[tuple[str, str]]:
    """(page, import statement) for every `streamagents` import in the pages' Python blocks."""
    found = []
    for page in PAGES:
        for block in _PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    statement = ast.unparse(node)
                    if "streamagents" in statement:
                        found.append((str(page.relative_to(ROOT)), statement))
    return found


@pytest.mark.parametrize(("page", "statement"), documented_imports())
def test_every_import_a_page_shows_works(page: str, statement: str) -> None:
    exec(statement, {})  # the import a reader would copy, and nothing else of the snippet
