"""Event logs for the replay-report tests, made by the real engine and the real writer.

`InputScriptedTestModel` is a test double: it answers each run from a script chosen by the
run's input text (the last user message), one reply per model turn of the run, so runs of
many keys may interleave in any order. `record_log` runs inputs through an
`EngineHarness` with it and writes the run events with `EventLogWriter`, as a job's
event-log sink does, into a folder of its own. `scenario_logs` writes the scenario the
tests share: a baseline and a candidate (as a changed prompt would answer) over inputs of
four keys that show every kind of difference once.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine_harness import OPEN, harness
from runtime_tools import camera
from sample_runs import HOSTILE

from streamagents.connectors.eventlog import EventLogWriter
from streamagents.connectors.providers import ChatModel
from streamagents.connectors.providers.errors import BadRequest, EmptyResponseError
from streamagents.connectors.providers.prices import ModelPrices
from streamagents.jobs.examples.sample_data import png
from streamagents.operators.agent.config import ModelSpec
from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.messages import ChatMessage
from streamagents.testing import answer, calls

Script = Mapping[str, Sequence[ChatResponse | BaseException]]
"""Input text -> the replies of that input's run, one per model turn."""

PHOTO = png(8, 6, (20, 120, 200), [(1, 1, 4, 4, (250, 250, 0))])
"""A small real PNG an input carries."""


@dataclass
class InputScriptedTestModel(ChatModel):
    """Test double: replies from `script` by the run's input text and its model turn."""

    script: Script
    provider: str = "input-scripted-test-double"
    asked: list[str] = field(default_factory=list)

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        """The scripted reply to this run's input at its model turn."""
        start = max(i for i, m in enumerate(messages) if m.role == "user")
        text = messages[start].content
        turn = sum(1 for m in messages[start:] if m.role == "assistant")
        self.asked.append(text)
        reply = self.script[text][turn]
        if isinstance(reply, BaseException):
            raise reply
        return reply


@dataclass(frozen=True)
class Input:
    """One input line: its key, id, text and whether it carries `PHOTO`."""

    key: str
    input_id: str
    text: str
    photo: bool = False

    def line(self) -> str:
        """The input line a source would read."""
        record: dict[str, Any] = {"id": self.input_id, "key": self.key, "text": self.text}
        if self.photo:
            data = base64.b64encode(PHOTO).decode()
            record["parts"] = [{"kind": "image", "mime_type": "image/png", "data": data}]
        return json.dumps(record)


def record_log(
    tmp_path: Path, name: str, script: Script, inputs: Sequence[Input], **config: Any
) -> Path:
    """Run `inputs` through the engine with `script` (tool `camera` offered) and write the
    run events at level verbose into `tmp_path/name`; the media store is `tmp_path/media`
    for every log made under `tmp_path`."""
    made = harness(tmp_path, InputScriptedTestModel(script), tools=[camera], **config)
    for item in inputs:
        made.send(item.key, item.line())
    made.settle_all()
    made.end_input()
    made.close()
    OPEN.remove(made)
    folder = tmp_path / name
    with EventLogWriter(folder, level="verbose") as writer:
        writer.write_all(text for channel, text in made.emitted if channel == "events")
    return folder


PRICED = ModelSpec(
    provider="test",
    model="priced-double",
    prices=ModelPrices(input_per_million=1.0, output_per_million=2.0),
)
"""The scripted model as configured: priced, so runs have a cost."""

INPUTS = [
    Input("k1", "i1", "hi"),
    Input("k1", "i2", "weather?"),
    Input("k2", "i3", "photo?", photo=True),
    Input("k2", "i4", "refund"),
    Input("k3", "i5", "broken"),
    Input("k3", "i6", "both fail"),
    Input("k1", "i8", "lookup"),
    Input("k4", "i7", "only recorded"),
]

RECORDED = {
    "hi": [answer("Hello there.")],
    "weather?": [answer("Sunny, 21 C.")],
    "photo?": [calls(("camera", {"name": "north"})), answer("A yellow box.")],
    "refund": [answer("Refund sent.")],
    "broken": [BadRequest("the request was refused")],
    "both fail": [BadRequest("refused")],
    "lookup": [calls(("camera", {"name": "a", "zoom": 2})), answer("Done.")],
    "only recorded": [answer("Here.")],
}
"""The baseline's replies: one list per input, one reply per model turn."""

CANDIDATE = {
    "hi": [answer("Hello   there.\n")],  # whitespace only: the same answer
    "weather?": [answer(f"Rain {HOSTILE}", input_tokens=40, output_tokens=20)],
    "photo?": [calls(("camera", {"name": "south"})), answer("A yellow box.")],
    "refund": [BadRequest("the request was refused")],
    "broken": [answer("Fixed now.")],
    "both fail": [EmptyResponseError("empty")],
    "lookup": [calls(("camera", {"zoom": 2, "name": "a"})), answer("Done.")],
}
"""The candidate's replies, as a changed prompt would make them (one input it never ran)."""


def scenario_logs(root: Path) -> dict[str, Path]:
    """The scenario's baseline recorded twice (`recorded`, `again`) and the candidate's log
    (`candidate`), under `root` with one media store for all."""
    return {
        "recorded": record_log(root, "recorded", RECORDED, INPUTS, spec=PRICED),
        "again": record_log(root, "again", RECORDED, INPUTS, spec=PRICED),
        "candidate": record_log(root, "candidate", CANDIDATE, INPUTS[:-1], spec=PRICED),
    }
