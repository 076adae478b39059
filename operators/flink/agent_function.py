"""The keyed agent function: the `AgentEngine` bound to a PyFlink keyed operator.

`AgentFunction` is a `KeyedProcessFunction` (thread mode). `open()` binds the engine's
`KeyedPort` to Flink's keyed state and timer service, builds the runtime, starts the
`EngineLoop` thread on which calls run, and opens the event log and telemetry;
`process_element` and `on_timer` hand each callback to the engine (see
`streamagents.operators.engine` for what it does with them).

Three facts of PyFlink 2.3 shape this shell: pyarrow calls deadlock on the task thread,
so what opens or touches the media store runs on a helper thread (`_off_task`,
`TaskThreadStore`); a function's `close()` is called only at the end of a bounded input,
so a `TaskWatch` closes it when its task ends otherwise (cancel, failure); and keyed
state must be declared in `open()`, which `FlinkKeyedPort` does for the engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pyflink.datastream import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.functions import TimeDomain

from streamagents.operators.agent.config import AgentConfig
from streamagents.operators.agent.runtime import AgentRuntime
from streamagents.operators.engine import AgentEngine, Emitter, EngineLoop, EngineMetrics
from streamagents.operators.flink._frozen_heap import freeze_long_lived, freeze_soon
from streamagents.operators.flink._sdk_logging import quiet_sdk_loggers
from streamagents.operators.flink._task_thread_store import TaskThreadStore
from streamagents.operators.flink._task_watch import TaskWatch
from streamagents.operators.flink.eventlog_sink import EventLogSinkFunction
from streamagents.operators.flink.keyed_port import FlinkKeyedPort
from streamagents.operators.flink.side_outputs import SIDE_OUTPUTS
from streamagents.operators.telemetry.live import LiveTelemetry

__all__ = ["AgentFunction", "RuntimeFactory"]

RuntimeFactory = Callable[[AgentConfig], AgentRuntime]
"""Builds the runtime a subtask drives, in `open()`; must be picklable (module level)."""

T = TypeVar("T")


def _task_info(runtime_context: RuntimeContext, method: str, java_getter: str) -> int:
    """A number about the task (`method` of the runtime context). In thread mode PyFlink
    2.3's runtime context asks Flink 2's Java context for methods it moved to its task info
    (`java_getter` there), so ask that."""
    try:
        return int(getattr(runtime_context, method)())
    except AttributeError:
        java = runtime_context._runtime_context  # type: ignore[attr-defined]
        return int(getattr(java.getTaskInfo(), java_getter)())


def _parallelism(runtime_context: RuntimeContext) -> int:
    """The parallelism the operator runs at."""
    return _task_info(
        runtime_context, "get_number_of_parallel_subtasks", "getNumberOfParallelSubtasks"
    )


def _attempt(runtime_context: RuntimeContext) -> int:
    """Which attempt of the subtask this is: 0 the first, more after restarts."""
    return _task_info(runtime_context, "get_attempt_number", "getAttemptNumber")


class AgentFunction(KeyedProcessFunction):
    """Runs one agent run per key at a time, many keys concurrently, state in keyed state."""

    def __init__(
        self,
        config: AgentConfig,
        runtime_factory: RuntimeFactory,
        event_log: EventLogSinkFunction | None = None,
    ) -> None:
        self._config = config
        self._runtime_factory = runtime_factory
        self._event_log = event_log

    def open(self, runtime_context: RuntimeContext) -> None:
        """Build the runtime and the engine over Flink's keyed state, start the loop thread."""
        quiet_sdk_loggers()
        self._steps = ThreadPoolExecutor(1, thread_name_prefix="streamagents-steps")
        # The model's limits are this subtask's share, from the parallelism it runs at now
        # (after a rescale: the new one).
        subtasks = _parallelism(runtime_context)
        self._config = self._config.model_copy(update={"subtasks": subtasks})
        runtime = self._off_task(self._runtime_factory, self._config)
        self._off_task(runtime.model.prepare)
        runtime.store = TaskThreadStore(runtime.store, self._steps)
        runtime.attempt = _attempt(runtime_context)
        self._runtime = runtime
        self._loop = EngineLoop(self._config.max_in_flight).start()
        # Build the model's client while the rest of open() and Flink's restore run: a
        # restarted job's first calls are made in this process (see `SdkProcessModel`).
        self._loop.start_soon(runtime.model.warm())
        redact = self._config.redactor()  # what every record, event and span passes
        if self._event_log is not None:
            self._event_log.open(runtime_context, watch=False, redact=redact)  # closed with us
        telemetry = self._config.telemetry
        self._telemetry = (
            None
            if telemetry is None
            else self._off_task(
                functools.partial(LiveTelemetry, redact=redact), telemetry, self._config.job_id
            )
        )
        metrics = EngineMetrics(
            runtime_context.get_metrics_group().add_group("streamagents"),
            [model.name for model in self._config.model.chain()],
        )
        emitter = Emitter(
            SIDE_OUTPUTS,
            metrics,
            self._event_log,
            self._config.event_log_level,
            self._telemetry,
            self._config.job_id,
            redact,
        )
        self._port = FlinkKeyedPort(runtime_context)
        self._engine = AgentEngine(
            self._port,
            self._config,
            runtime,
            self._loop,
            metrics,
            emitter,
        )
        self._watch = TaskWatch(self.close)
        if runtime.attempt == 0:
            freeze_long_lived()
        else:  # a restart: its subtasks' restored calls do not wait behind the collection
            freeze_soon()

    def close(self) -> None:
        """Stop the loop thread (cancelling calls still running) and close the runtime:
        at the end of bounded input, or when the task ended otherwise (`TaskWatch`)."""
        self._engine.close()
        self._watch.stop()
        self._loop.stop(self._runtime.aclose)
        if self._telemetry is not None:
            self._off_task(self._telemetry.close)
        self._steps.shutdown(wait=False)
        if self._event_log is not None:
            self._event_log.close()

    def _off_task(self, function: Callable[..., T], *args: Any) -> T:
        """Run `function` on the steps thread and wait for it: for what may open or touch
        pyarrow (building the runtime and its media store, telemetry), which deadlocks on
        the task thread (see `TaskThreadStore`). The runtime's steps run on the task thread:
        their media store calls make this hop themselves."""
        return self._steps.submit(function, *args).result()

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        """Hand an input line (or a decision line) of its key to the engine."""
        self._port.bind(ctx, value[0])
        yield from self._engine.process_input(value[1])

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        """Hand a timer of a key to the engine; event time means the input has ended."""
        self._port.bind(ctx, ctx.get_current_key())
        yield from self._engine.on_timer(timestamp, ctx.time_domain() == TimeDomain.EVENT_TIME)
