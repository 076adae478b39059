"""A job's own secret values are redacted from what it emits even when they have no token
shape: the `${ENV}` values its spec puts in secret fields (here a Kafka password inside
`sasl.jaas.config`) are known to the agent's config, and outputs, dead letters, events, the
event log and spans pass its `Redactor`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import LoadedSpec, load_spec
from streamagents.operators.telemetry.spans import LiveSpans
from streamagents.serde.chat import TokenUsage
from streamagents.serde.events import AgentEvent, EventType, new_event
from streamagents.serde.messages import ChatMessage
from streamagents.serde.safe_text import Redactor, redact_secrets
from streamagents.testing import AgentHarness, ScriptedTestModel, answer

TOKEN = "correct-horse-battery-staple"
"""A password without any token shape: only knowing it can redact it."""

SPEC = """
name: secret-values
source:
  kafka:
    topics: [tickets]
    bootstrap_servers: 127.0.0.1:9
    group_id: agents
    properties:
      sasl.jaas.config: >-
        org.apache.kafka.common.security.plain.PlainLoginModule required
        username="agent" password="${API_TOKEN}";
      client.id: ${CLIENT_ID}
key: customer
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: "${GEMINI_KEY}"}}
  system_prompt: "You answer for ${TEAM}."
  mcp_servers:
    - name: crm
      transport:
        type: http
        url: "https://bot:${CRM_PASSWORD}@crm.example/mcp?tenant=${TENANT}"
        headers: {Authorization: "Token ${CRM_TOKEN}"}
      allow: ["*"]
media_store: media
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""

ENV = {
    "API_TOKEN": TOKEN,
    "CLIENT_ID": "agents-client-7",
    "GEMINI_KEY": "gemini-key-value",
    "TEAM": "the support desk",
    "CRM_PASSWORD": "crm-password-9",
    "TENANT": "acme-tenant",
    "CRM_TOKEN": "crm-token-value",
}


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedSpec:
    """The spec, loaded with `ENV` as its environment."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    return load_spec(spec, ENV)


def test_the_spec_knows_the_env_values_of_its_secret_fields(loaded: LoadedSpec) -> None:
    found = set(loaded.secret_values())
    assert {TOKEN, "agents-client-7", "gemini-key-value", "crm-token-value"} <= found
    assert {"crm-password-9", "acme-tenant"} <= found  # a URL's user info and query
    assert "the support desk" not in found  # a prompt is no secret


def test_outputs_dead_letters_and_events_carry_no_secret_value(loaded: LoadedSpec) -> None:
    model = ScriptedTestModel(
        [answer(f"Your password is {TOKEN}."), RuntimeError(f"the broker refused {TOKEN}")]
    )
    with AgentHarness.from_loaded(loaded, model) as agent:
        answered = agent.ask(f"I lost the password {TOKEN}", key="c1")
        failed = agent.ask("and again?", key="c2")
    assert answered.output is not None
    assert answered.text == "Your password is [REDACTED]."
    assert failed.dead_letter is not None
    emitted = [answered.output, failed.dead_letter, *answered.events, *failed.events]
    assert TOKEN not in json.dumps(emitted)
    assert "[REDACTED]" in json.dumps(failed.dead_letter)


def _echoing_events(run_id: str) -> list[AgentEvent]:
    request = new_event(
        EventType.CHAT_REQUEST,
        job_id="secret-values",
        key="c1",
        run_id=run_id,
        sequence=0,
        timestamp_ms=1_000,
        messages=[ChatMessage(role="user", content=f"my password is {TOKEN}")],
        model="gemini-2.5-flash",
    )
    response = new_event(
        EventType.CHAT_RESPONSE,
        job_id="secret-values",
        key="c1",
        run_id=run_id,
        sequence=1,
        timestamp_ms=1_500,
        upstream_event_id=request.event_id,
        messages=[ChatMessage(role="assistant", content=f"noted: {TOKEN}")],
        model="gemini-2.5-flash",
        usage=TokenUsage(input_tokens=3, output_tokens=2),
    )
    return [request, response]


def test_the_event_log_carries_no_secret_value(loaded: LoadedSpec, tmp_path: Path) -> None:
    redact = loaded_redactor(loaded)
    with EventLogWriter(tmp_path / "log", level="verbose", codec="null", redact=redact) as log:
        log.write_all(_echoing_events("run-1"))
    written = b"".join(path.read_bytes() for path in (tmp_path / "log").iterdir())
    assert b"[REDACTED]" in written
    assert TOKEN.encode() not in written


def test_spans_carry_no_secret_value(loaded: LoadedSpec) -> None:
    spans = LiveSpans(capture_content=True, redact=loaded_redactor(loaded))
    built = spans.add(_echoing_events("run-2")) + spans.end("run-2")
    texts = json.dumps([[span.attributes, span.error] for span in built], default=str)
    assert "[REDACTED]" in texts
    assert TOKEN not in texts


def loaded_redactor(loaded: LoadedSpec) -> Redactor:
    """The redactor the job's operator builds from the config the spec gives."""
    return agent_config(loaded, model_spec(loaded.model)).redactor()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("say correct-horse-battery-staple", "say [REDACTED]"),
        ('{"a": "pa\\"ss\\\\w0rd"}', '{"a": "[REDACTED]"}'),  # as a JSON string holds it
        ("hunter12 and xhunter12", "[REDACTED] and xhunter12"),  # short: whole tokens only
        ("abcde stays", "abcde stays"),  # under MIN_SECRET_CHARS: never redacted
    ],
)
def test_a_redactor_replaces_known_values_by_length(text: str, expected: str) -> None:
    redact = Redactor.of([TOKEN, 'pa"ss\\w0rd', "hunter12", "abcde"])
    assert redact(text) == expected
    assert redact_secrets(expected) == expected
