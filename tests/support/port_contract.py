"""The cases both bindings of the engine's port must run alike, and what each must give.

One script of input lines and pauses drives the engine through: a run with a tool call
(`t`), an input queued behind its key's busy run (`q`), a follow-up that comes due and runs
(`f`), a key whose memory expires between two inputs (`m`: its second run is again its
key's run 0), a follow-up still waiting at the end of input (`g`: a `FollowupPending` dead
letter), and a run in flight when the input ends (`d`: the drain finishes it).
`in_memory_run` plays it on `InMemoryKeyedPort` through the engine harness; the e2e test
plays it in one PyFlink job (`paced` turns the pauses into real time there), and both
results go through `normalised` (what depends on the clock is left out) and
`check_cases`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from engine_harness import harness

from streamagents.connectors.media import MediaStore
from streamagents.operators.agent import AgentConfig, AgentRuntime, ModelSpec, tool
from streamagents.operators.agent.config import FollowupConfig, MemoryConfig
from streamagents.operators.agent.tools import ToolRegistry
from streamagents.testing import EchoTestModel

PAUSE_S = 3.0
"""The pause in the script: longer than the memory TTL and the follow-up's delay."""

SPEC = ModelSpec(provider="test", model="port-contract")

SETTINGS: dict[str, Any] = {
    "job_id": "port-contract",
    "max_in_flight": 4,
    "followups": FollowupConfig(enabled=True, min_delay_s=0.5),
    "memory": MemoryConfig(ttl_seconds=1.0),
}
"""The agent's settings in both runs (the model and media store aside)."""

BEFORE_PAUSE = [
    ("t", "t-1", "tool:lookup A1"),
    ("q", "q-1", "first"),
    ("q", "q-2", "second"),
    ("f", "f-1", "followup:0.5 look again"),
    ("m", "m-1", "remember this"),
    ("g", "g-1", "followup:600 too late"),
]
AFTER_PAUSE = [
    ("m", "m-2", "remember?"),
    ("d", "d-1", "tool:lookup D4"),
]


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: Order number.
    """
    return f"{order} delivered"


def line(key: str, input_id: str, text: str) -> str:
    """An input line of the script."""
    return json.dumps({"id": input_id, "key": key, "text": text})


def script_lines() -> list[str]:
    """The script as a job's source holds it: input lines and one `pause:` line."""
    return [
        *(line(*case) for case in BEFORE_PAUSE),
        f"pause:{PAUSE_S}",
        *(line(*case) for case in AFTER_PAUSE),
    ]


def paced(raw: str) -> Iterator[str]:
    """Pass an input line on; sleep on a `pause:<seconds>` line (the job's source step)."""
    if raw.startswith("pause:"):
        time.sleep(float(raw[len("pause:") :]))
        return
    yield raw


def contract_config(media_store: str) -> AgentConfig:
    """The agent as the job runs it."""
    return AgentConfig(model=SPEC, media_store=media_store, **SETTINGS)


def contract_runtime(config: AgentConfig) -> AgentRuntime:
    """The job's runtime: the echo test model and the `lookup` tool (a `RuntimeFactory`)."""
    return AgentRuntime(
        config, EchoTestModel(), ToolRegistry([lookup]), MediaStore(config.media_store)
    )


class Emitted(NamedTuple):
    """What a run of the script emitted, each record parsed."""

    outputs: list[dict[str, Any]]
    events: list[dict[str, Any]]
    dead_letters: list[dict[str, Any]]


def in_memory_run(tmp_path: Path) -> Emitted:
    """Play the script on the in-memory port: the calls finish as the clock moves on, the
    pause is time passing, and the input ends right after the last line."""
    h = harness(tmp_path, EchoTestModel(), tools=[lookup], spec=SPEC, **SETTINGS)
    for case in BEFORE_PAUSE:
        h.send_input(*case)
    h.settle_all()
    h.advance(int(PAUSE_S * 1000))
    h.settle_all()
    for case in AFTER_PAUSE:
        h.send_input(*case)
    h.end_input()
    assert not h.runner.pending, "the drain left a call in flight"
    return Emitted(h.outputs(), h.records("events"), h.dead_letters())


_CLOCK = re.compile(r'"due_at": "[^"]*"|\d{7,}')
"""What a follow-up's answer says about the clock: its due time."""


def normalised(emitted: Emitted) -> dict[str, list[tuple[Any, ...]]]:
    """What must be the same on both ports, sorted: outputs (id, key, status, text), events
    (ids, run, sequence, type, the event they follow, the run's place among its key's
    runs) and dead letters (id, key, stage, error type)."""
    return {
        "outputs": sorted(
            (o["id"], o["key"], o["status"], _CLOCK.sub("#", o["text"] or ""))
            for o in emitted.outputs
        ),
        "events": sorted(
            (
                e["event_id"],
                e["run_id"],
                e["key"],
                e["sequence"],
                e["event_type"],
                e["upstream_event_id"],
                e["payload"]["attributes"].get("key_sequence"),
            )
            for e in emitted.events
        ),
        "dead_letters": sorted(
            (d["id"], d["key"], d["stage"], d["error_type"]) for d in emitted.dead_letters
        ),
    }


def check_cases(emitted: Emitted) -> None:
    """Assert what each case of the script promises."""
    texts = {o["id"]: o["text"] for o in emitted.outputs}
    assert texts["t-1"] == "done: A1 delivered"  # the tool call's result reached the model
    assert [o["id"] for o in emitted.outputs if o["key"] == "q"] == ["q-1", "q-2"]
    followup_runs = [o for o in emitted.outputs if o["id"].startswith("followup-")]
    assert [(o["key"], o["text"]) for o in followup_runs] == [("f", "echo: look again")]
    runs_of_m = [
        e["payload"]["attributes"]["key_sequence"]
        for e in emitted.events
        if e["key"] == "m" and e["event_type"] == "input"
    ]
    assert runs_of_m == ["0", "0"], "m's memory did not expire between its inputs"
    assert [(d["key"], d["error_type"]) for d in emitted.dead_letters] == [("g", "FollowupPending")]
    assert texts["d-1"] == "done: D4 delivered"  # the drain finished the run in flight
    assert set(texts) == {case[1] for case in BEFORE_PAUSE + AFTER_PAUSE} | {
        o["id"] for o in followup_runs
    }
