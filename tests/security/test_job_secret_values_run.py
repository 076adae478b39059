"""A real job (`streamagents run` on the example, demo model) keeps a secret value of its own
that has no token shape out of its outputs, dead letters and event log: the operator builds
its redactor where it opens, and the parse step's dead letters pass it too."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_jobs import CLI, demo_env

from streamagents.connectors.eventlog import read_events
from streamagents.connectors.files import read_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "jobs" / "examples"
TOKEN = "correct-horse-battery-staple"
DEMO_ENTRY = "      responder: streamagents.jobs.examples.demo_responder:respond\n"


@pytest.mark.e2e
def test_a_run_writes_no_secret_value_of_its_spec(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "job", ignore=shutil.ignore_patterns("out", "__pycache__"))
    spec = tmp_path / "job" / "support_tickets.yaml"
    text = spec.read_text()
    assert DEMO_ENTRY in text
    spec.write_text(
        text.replace(DEMO_ENTRY, DEMO_ENTRY + '      options: {api_key: "${DEMO_TOKEN}"}\n')
    )
    tickets = tmp_path / "job" / "data" / "tickets"
    shutil.rmtree(tickets)
    tickets.mkdir()
    ticket = {"id": "T-1", "customer": {"id": "C-1"}, "text": f"My password is {TOKEN}."}
    (tickets / "tickets.jsonl").write_text(
        json.dumps(ticket) + "\n" + f'{{"id": "T-2", "text": "{TOKEN}" not json\n'
    )
    env = {**demo_env(), "DEMO_TOKEN": TOKEN}
    result = subprocess.run(
        [*CLI, "run", str(spec), "--progress-interval", "0.5"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "job" / "out" / "support_tickets"
    outputs, dead = read_jsonl(out / "answers"), read_jsonl(out / "dead_letters")
    events = list(read_events(out / "events"))
    assert [o["id"] for o in outputs] == ["T-1"] and len(dead) == 1 and events
    written = json.dumps([outputs, dead, events], default=str)
    assert TOKEN not in written + result.stdout + result.stderr
    assert "[REDACTED]" in json.dumps(dead) and "[REDACTED]" in json.dumps(events, default=str)
