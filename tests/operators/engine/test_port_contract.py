"""The port contract's cases on the in-memory port (the PyFlink binding runs them in
tests/e2e/test_port_contract.py and must give the same)."""

from __future__ import annotations

from pathlib import Path

from port_contract import check_cases, in_memory_run


def test_the_contract_cases_keep_their_promises_on_the_in_memory_port(tmp_path: Path) -> None:
    """A tool call, a queued input, a follow-up, an expired memory, a follow-up dead-lettered
    and a run drained at the end of input each give what the case promises."""
    check_cases(in_memory_run(tmp_path))
