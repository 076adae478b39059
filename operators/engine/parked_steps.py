"""What decisions, deadlines and the end of input do to runs waiting for approvals.

A decision line is applied at once to the run it names: the key's parked run, a run set
aside (`while_parked: separate_run`), or a run whose other call is still out. A parked
run's deadline timer rejects what timed out; at the end of input a parked run ends with an
`ApprovalPending` dead letter. A set-aside run whose approvals are settled goes on when
its key has no run in progress, before the key's queued inputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamagents.operators.agent import RunState, Step
from streamagents.operators.agent.approval_steps import name_the_call
from streamagents.operators.agent.approvals import read_decision_line
from streamagents.operators.agent.parked_keys import run_of_call
from streamagents.operators.engine.run_steps import RunSteps, usage_of

__all__ = ["ParkedSteps"]


class ParkedSteps(RunSteps):
    """The steps of runs that wait for a person's decision."""

    def _decide(self, raw: str) -> Iterator[Any]:
        """Apply a decision to the key's run: parked or not, it never waits in the queue."""
        now = self._port.now_ms()
        key = self._port.current_key()
        decision = read_decision_line(raw)
        if decision.call_id is None:
            named = name_the_call(self._runtime.tools, decision, self._runs_of_key(key), key)
            if isinstance(named, Step):
                yield from self._unchanged(named)
                return
            decision = named
        assert decision.call_id is not None
        aside = self._parked.aside(run_of_call(decision.call_id))
        call = None if aside is not None else self._driver.of(key)
        stored = aside if aside is not None else self._run.value()
        state = call.state if call is not None else None
        if state is None and stored is not None:
            state = RunState.model_validate_json(stored)
        settled = self._parked.settled(decision.call_id)
        step = self._runtime.decide(state, decision, now, settled, key)
        if aside is not None:
            assert state is not None
            yield from self._step_aside(step, state, now)
            return
        if step.duplicate or step.state is state:
            yield from self._unchanged(step)
            return
        if call is not None and step.state is not None:
            # its other call is running: its outcome is applied to the decided state
            yield from self._emit.events(step.events)
            self._parked.remember(step.settled, now)
            call.state = step.state
            self._run.update(step.state.model_dump_json())
            return
        assert state is not None
        history = self._memory.load(now)
        yield from self._continue(step, usage_of(state), history, now)

    def _runs_of_key(self, key: str) -> list[RunState]:
        """The key's runs that may wait for decisions: its current run and those set aside."""
        call = self._driver.of(key)
        stored = self._run.value()
        current = call.state if call is not None else None
        if current is None and stored is not None:
            current = RunState.model_validate_json(stored)
        aside = [state for _, state in self._parked.aside_runs()]
        return ([current] if current is not None else []) + aside

    def _unchanged(self, step: Step) -> Iterator[Any]:
        """A decision that changed no run (a duplicate, or refused): its dead letter, if any."""
        yield from self._emit.events(step.events, traced=False)
        if step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)

    def _wake_parked(self, state: RunState, now_ms: int) -> Iterator[Any]:
        """On a timer of a parked run: at the end of input end it (dead letter), past a
        deadline reject what timed out and go on, else set its deadline timer again."""
        due = state.next_deadline_ms
        draining = self._input_end.draining
        if not draining and (due is None or due > now_ms):
            self._parked.park(state)  # another timer of the key (cleanup, a restored poll)
            return
        history = self._memory.load(now_ms)
        if draining:
            step = self._runtime.abandon_parked(state, now_ms)
        else:
            step = self._runtime.expire(state, now_ms)
        yield from self._continue(step, usage_of(state), history, now_ms)

    def _wake_aside(self, now_ms: int) -> Iterator[Any]:
        """On a timer of a key with runs set aside: at the end of input end each parked one
        (`ApprovalPending` dead letter), else reject what timed out (`_step_aside`)."""
        for run_id, state in self._parked.aside_runs():
            if self._input_end.draining:
                if state.parked:
                    self._parked.take_aside(run_id)
                    step = self._runtime.abandon_parked(state, now_ms)
                    yield from self._end_aside(step, now_ms)
                continue
            due = state.next_deadline_ms
            if due is not None and due <= now_ms:
                step = self._runtime.expire(state, now_ms)
                yield from self._step_aside(step, state, now_ms)

    def _step_aside(self, step: Step, state: RunState, now_ms: int) -> Iterator[Any]:
        """Apply a decision or an expiry to a run set aside: it stays aside while parked, or
        while its key runs another (ready: `_resume_ready` takes it on), else goes on now."""
        if step.duplicate or step.state is state:
            yield from self._unchanged(step)
            return
        busy = self._busy(self._port.current_key())
        if step.state is not None and (step.state.parked or busy):
            yield from self._emit.events(step.events)
            self._parked.remember(step.settled, now_ms)
            self._parked.set_aside(step.state)
            return
        self._parked.take_aside(state.run_id)
        if step.state is None and busy:
            yield from self._end_aside(step, now_ms)
            return
        history = self._memory.load(now_ms)
        yield from self._continue(step, usage_of(state), history, now_ms)

    def _end_aside(self, step: Step, now_ms: int) -> Iterator[Any]:
        """Emit the records of a set-aside run that ended without going on (rejected to an
        error, or abandoned at the end of input), leaving the key's `run` state alone; such
        an ending never changes the key's memory."""
        yield from self._emit.events(step.events, run_ended=True)
        self._parked.remember(step.settled, now_ms)
        if step.dead_letter is not None:
            yield self._emit.dead_letter(step.dead_letter)
        yield from self._ended(step)

    def _resume_ready(self) -> Iterator[Any]:
        """Go on with the key's first ready set-aside run, with the key's memory as it is
        now; returns whether one went on."""
        state = self._parked.ready()
        if state is None:
            return False
        self._parked.take_aside(state.run_id)
        now = self._port.now_ms()
        history = self._memory.load(now)
        return (yield from self._apply_step(Step(state=state), usage_of(state), history, now))
