"""Job spec files for the spec tests: YAML text written where `load_spec` reads it."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_spec(tmp_path: Path, text: str) -> Path:
    """Write `text` (dedented) as `job.yaml` in `tmp_path` and return its path."""
    path = tmp_path / "job.yaml"
    path.write_text(textwrap.dedent(text))
    return path
