"""The call journal on the engine: a call completed after the last checkpoint is answered
from the journal after a restore or a rerun (the model is not asked again, the tool does
not run again); a damaged entry or another request under the same id is called again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from engine_harness import OPEN, EngineHarness
from spec_files import write_spec

from streamagents.connectors.call_journal import CallJournal, FileCallJournal, InMemoryCallJournal
from streamagents.connectors.media import MediaStore
from streamagents.jobs.graph import agent_config
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import load_spec
from streamagents.operators.agent import AgentRuntime, tool
from streamagents.operators.agent.config import AgentConfig, JournalConfig, ModelSpec
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.testing import EchoTestModel

JournalFactory = Callable[[], CallJournal]


class Counter:
    """A tool with a side effect outside the job: it counts its executions."""

    def __init__(self) -> None:
        self.runs = 0

    def tool(self) -> object:
        @tool(name="count")
        def count(order: str) -> str:
            """Count an execution."""
            self.runs += 1
            return f"counted {order}"

        return count


def journaled(
    tmp_path: Path, model: EchoTestModel, journal: JournalFactory, counter: Counter | None = None
) -> EngineHarness:
    """A harness whose every attempt opens the journal `journal` gives (a shared in-memory
    one, or a new file journal over the same directory, as a restarted process would)."""
    config = AgentConfig(
        media_store=str(tmp_path / "media"),
        model=ModelSpec(provider="test", model="engine-harness"),
        journal=JournalConfig(enabled=True),
    )
    tools = [counter.tool()] if counter is not None else []

    def runtime() -> AgentRuntime:
        registry = ToolRegistry(tools)
        return AgentRuntime(
            config, model, registry, MediaStore(config.media_store), journal=journal()
        )

    made = EngineHarness(runtime, config)
    OPEN.append(made)
    return made


@pytest.fixture(params=["memory", "file"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> JournalFactory:
    if request.param == "memory":
        shared = InMemoryCallJournal()
        return lambda: shared
    return lambda: FileCallJournal(str(tmp_path / "media"), "streamagents")


def events(h: EngineHarness, event_type: str) -> list[dict[str, object]]:
    return [e for e in h.records("events") if e["event_type"] == event_type]


def test_a_model_call_completed_after_the_checkpoint_is_answered_from_the_journal(
    tmp_path: Path, journal: JournalFactory
) -> None:
    model = EchoTestModel()
    h = journaled(tmp_path, model, journal)
    h.send_input("k", "i1", "hello")
    checkpoint = h.checkpoint()
    h.settle_all()
    assert model.requests == 1
    h.restore(checkpoint)
    h.settle_all()
    assert model.requests == 1  # the restored run's call was answered from the journal
    assert [o["id"] for o in h.outputs()] == ["i1"]
    assert h.outputs()[0]["text"] == "echo: hello"
    [response] = events(h, "chat_response")
    assert response["payload"]["attributes"]["from_journal"] == "true"
    assert h.count("calls_from_journal") == 1


def test_a_tool_runs_once_across_a_restore(tmp_path: Path, journal: JournalFactory) -> None:
    model, counter = EchoTestModel(), Counter()
    h = journaled(tmp_path, model, journal, counter)
    h.send_input("k", "i1", "tool:count a")
    h.complete("k")
    h.advance(1000)  # the model asked for the tool: the tool call is in flight
    checkpoint = h.checkpoint()
    h.settle_all()
    assert (counter.runs, model.requests) == (1, 2)
    h.restore(checkpoint)
    h.settle_all()
    assert (counter.runs, model.requests) == (1, 2)
    assert [o["text"] for o in h.outputs()] == ["done: counted a"]
    [result] = events(h, "tool_response")
    assert result["payload"]["attributes"]["from_journal"] == "true"


def test_a_rerun_of_the_job_is_answered_from_the_journal(
    tmp_path: Path, journal: JournalFactory
) -> None:
    model, counter = EchoTestModel(), Counter()
    first = journaled(tmp_path, model, journal, counter)
    first.send_input("k", "i1", "tool:count a")
    first.settle_all()
    rerun = journaled(tmp_path, model, journal, counter)  # no state: a new job, same name
    rerun.send_input("k", "i1", "tool:count a")
    rerun.settle_all()
    assert (counter.runs, model.requests) == (1, 2)
    assert rerun.outputs() == first.outputs()


def test_without_the_journal_a_restored_call_is_made_again(tmp_path: Path) -> None:
    model = EchoTestModel()
    config = AgentConfig(
        media_store=str(tmp_path / "media"),
        model=ModelSpec(provider="test", model="engine-harness"),
    )
    h = EngineHarness(
        lambda: AgentRuntime(config, model, ToolRegistry([]), MediaStore(config.media_store)),
        config,
    )
    OPEN.append(h)
    h.send_input("k", "i1", "hello")
    checkpoint = h.checkpoint()
    h.settle_all()
    h.restore(checkpoint)
    h.settle_all()
    assert model.requests == 2
    assert "from_journal" not in events(h, "chat_response")[0]["payload"]["attributes"]


def test_a_damaged_entry_is_a_warning_and_the_call_is_made_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shared = InMemoryCallJournal()
    model = EchoTestModel()
    h = journaled(tmp_path, model, lambda: shared)
    h.send_input("k", "i1", "hello")
    checkpoint = h.checkpoint()
    h.settle_all()
    [entry] = shared.entries.values()
    shared.record(entry.model_copy(update={"result": '{"message": "not a response"'}))
    with caplog.at_level(logging.WARNING):
        h.restore(checkpoint)
        h.settle_all()
    assert model.requests == 2
    assert "is not a model response" in caplog.text
    assert [o["text"] for o in h.outputs()] == ["echo: hello"]
    assert h.count("calls_from_journal") == 0


def test_an_entry_for_another_request_under_the_same_id_answers_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shared = InMemoryCallJournal()
    model = EchoTestModel()
    h = journaled(tmp_path, model, lambda: shared)
    h.send_input("k", "i1", "hello")
    checkpoint = h.checkpoint()
    h.settle_all()
    [entry] = shared.entries.values()
    forged = entry.result.replace("echo: hello", "echo: forged")
    shared.record(entry.model_copy(update={"request_hash": "0" * 64, "result": forged}))
    with caplog.at_level(logging.WARNING):
        h.restore(checkpoint)
        h.settle_all()
    assert model.requests == 2
    assert "different request" in caplog.text
    assert [o["text"] for o in h.outputs()] == ["echo: hello"]


class BrokenJournal(InMemoryCallJournal):
    """A journal whose storage refuses every write."""

    def record(self, entry: object) -> None:
        raise OSError("the journal's filesystem is read-only")


def test_a_journal_that_cannot_be_written_loses_nothing_and_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = EchoTestModel()
    broken = BrokenJournal()
    h = journaled(tmp_path, model, lambda: broken)
    with caplog.at_level(logging.WARNING):
        h.send_input("k", "i1", "hello")
        h.settle_all()
    assert [o["text"] for o in h.outputs()] == ["echo: hello"]
    assert h.count("call_journal_write_failures") == 1
    assert "could not be recorded" in caplog.text


def test_a_spec_turns_the_journal_on_beside_its_media_store(tmp_path: Path) -> None:
    spec = """\
name: tickets
source:
  files: {path: in}
key: customer.id
agent:
  model: {provider: gemini, model: gemini-2.5-flash, options: {api_key: k}}
  journal: {enabled: true, roll_s: 30}
media_store: media
sinks:
  outputs: {path: out/answers}
  dead_letters: {path: out/dead}
"""
    loaded = load_spec(write_spec(tmp_path, spec), {})
    config = agent_config(loaded, model_spec(loaded.model))
    assert config.journal == JournalConfig(enabled=True, roll_s=30)
    runtime = AgentRuntime.from_config(config, EchoTestModel())
    assert runtime.durable is not None
    journal = runtime.durable.journal
    assert isinstance(journal, FileCallJournal)
    assert journal.directory.startswith(str(tmp_path / "media" / "journal"))
    assert (
        AgentRuntime.from_config(
            config.model_copy(update={"journal": JournalConfig()}), EchoTestModel()
        ).durable
        is None
    )
