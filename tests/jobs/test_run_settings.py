"""What `run` adds for its local mini-cluster: REST answers fresh enough to end a held
bounded input promptly, and the modules its tasks' Python is warmed with."""

from __future__ import annotations

from pyflink.common import Configuration

from streamagents.jobs.cli.run import (
    _LOCAL_POLL_S,
    OPERATORS_MODULE,
    _local_run_settings,
    _task_modules,
)
from streamagents.jobs.cluster.job_stop import _duration_s
from streamagents.operators.agent.config import ModelSpec


def test_a_local_run_reads_job_details_at_most_a_poll_old() -> None:
    # With Flink's default (web.refresh-interval, 3 s) the job details showed the held
    # input's source running for up to 3 s after it finished, and the job's end waited.
    config = Configuration()
    _local_run_settings(config)
    cached = _duration_s(config.get_string("rest.cache.execution-graph.timeout", "3 s"))
    assert 0 < cached <= _LOCAL_POLL_S


def test_tasks_are_warmed_with_the_operators_and_every_adapter_of_the_model_chain() -> None:
    model = ModelSpec(
        provider="gemini",
        model="gemini-2.5-flash",
        fallbacks=[
            {"provider": "openai-responses", "model": "gpt-4.1-mini"},
            {"provider": "gemini", "model": "gemini-2.5-pro"},
        ],
    )
    assert _task_modules(model) == [
        OPERATORS_MODULE,
        "streamagents.connectors.providers.gemini._model",
        "streamagents.connectors.providers.openai._models",
    ]
