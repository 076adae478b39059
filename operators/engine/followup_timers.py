"""Follow-ups a run scheduled, waiting in keyed state for their due time.

When a run that scheduled follow-ups (`schedule_followup`) ends, each is kept in the key's
`followups` map with a processing-time timer at its due time (the engine holds the key's
end-of-input timer for them). When it is due its input line starts a run, or waits in the
key's queue behind its run. Once the input has ended a waiting follow-up can never run: it
becomes a `FollowupPending` dead letter holding its line. See docs/followups.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from streamagents.operators.agent.emitted_records import DeadLetter
from streamagents.operators.agent.followups import Followup, followup_line
from streamagents.operators.agent.records import ErrorInfo
from streamagents.operators.engine.input_end import Phase
from streamagents.operators.engine.keyed_port import KeyContext, MapState

__all__ = ["FollowupTimers"]


class FollowupTimers:
    """The current key's waiting follow-ups and their timers."""

    def __init__(self, state: MapState, port: KeyContext, enabled: bool, key_field: str) -> None:
        self._port = port
        self._followups = state
        self.enabled = enabled
        self._key_field = key_field

    def waiting(self) -> list[Followup]:
        """The key's follow-ups waiting in keyed state, by due time."""
        if not self.enabled or self._followups.is_empty():
            return []
        waiting = [Followup.model_validate_json(v) for v in self._followups.values()]
        return sorted(waiting, key=lambda f: (f.due_ms, f.id))

    def keep(self, followups: list[Followup], phase: Phase) -> list[DeadLetter]:
        """Keep the follow-ups a run scheduled, each with its due-time timer; once the input
        has ended, their dead letters instead."""
        if phase is Phase.DRAINING:
            return self.drop(followups)
        for followup in followups:
            self._followups.put(followup.id, followup.model_dump_json())
            self._port.register_processing_timer(followup.due_ms)
        return []

    def cancel(self, followup_ids: list[str]) -> None:
        """Forget follow-ups a run cancelled."""
        for followup_id in followup_ids:
            self._followups.remove(followup_id)

    def drop(self, followups: list[Followup]) -> list[DeadLetter]:
        """At the end of a bounded input: the dead letter of each waiting follow-up, holding
        its input line to send again when it should still run."""
        letters = []
        for followup in followups:
            self._followups.remove(followup.id)
            error = ErrorInfo(
                type="FollowupPending",
                message=f"the input ended while follow-up {followup.id} waited for its due "
                f"time {followup.due_ms} (ms since the epoch); send the line again to run it",
            )
            line = followup_line(followup, self._key_field)
            letters.append(
                DeadLetter.build(
                    "followup",
                    error,
                    line,
                    key=self._port.current_key(),
                    record_id=json.loads(line)["id"],
                )
            )
        return letters

    def take_due(self, now_ms: int) -> Iterator[str]:
        """The input lines of the follow-ups due at `now_ms`, in due order, each removed
        from state as it is taken (the later ones still count as waiting until then)."""
        for followup in self.waiting():
            if followup.due_ms > now_ms:
                break
            self._followups.remove(followup.id)
            yield followup_line(followup, self._key_field)
