"""Progress and failure reports read from Flink's REST API (served here by a loopback stub)."""

from __future__ import annotations

from streamagents.connectors.loopback_stub import LoopbackStubServer, RecordedRequest, StubReply
from streamagents.jobs.cli.progress import Progress, latest_failure, read_progress

JOB = "0123456789abcdef0123456789abcdef"
METRICS = {
    "v1": {
        "0.Source__source.numRecordsOut": 4,
        "1.Source__source.numRecordsOut": 3,
        "0.numRecordsIn": 99,
    },
    "v2": {
        "0.tickets-agent.streamagents.runs_finished": 2,
        "1.tickets-agent.streamagents.runs_finished": 1,
        "0.tickets-agent.streamagents.runs_failed": 1,
        "0.tickets-agent.streamagents.in_flight": 2,
        "1.tickets-agent.streamagents.in_flight": 1,
        "0.dead-letters__Writer.numRecordsIn": 1,
    },
}


def flink_rest(request: RecordedRequest) -> StubReply | dict:
    path, _, query = request.path.partition("?")
    if path == f"/jobs/{JOB}":
        return {"state": "RUNNING", "vertices": [{"id": "v1"}, {"id": "v2"}]}
    if path == f"/jobs/{JOB}/exceptions":
        trace = (
            "pemja.core.PythonException: <class 'ValueError'>: bad\n"
            "\tat /venv/lib/pyflink/fn_execution/operations.open(operations.py:48)\n"
            "\tat /src/operators/agent_operator.open(agent_operator.py:173)\n"
        )
        return {
            "exceptionHistory": {
                "entries": [
                    {"exceptionName": "Old", "stacktrace": "old failure", "timestamp": "5"},
                    {"exceptionName": "X", "stacktrace": trace, "timestamp": "9"},
                ]
            }
        }
    vertex = path.split("/")[4]
    if not query:
        return StubReply([{"id": name} for name in METRICS[vertex]])
    wanted = query.removeprefix("get=").split(",")
    return StubReply([{"id": m, "value": str(METRICS[vertex][m])} for m in wanted])


def test_progress_sums_each_metric_over_subtasks_and_vertices() -> None:
    with LoopbackStubServer(flink_rest) as stub:
        progress = read_progress(f"127.0.0.1:{stub.port}", JOB)
    assert progress == Progress(
        records_in=7, runs_finished=3, runs_failed=1, in_flight=3, dead_letters=1
    )
    assert progress.line() == "in 7 | finished 3 (1 failed) | in flight 3 | dead letters 1"


def test_latest_failure_names_the_exception_and_our_frame() -> None:
    with LoopbackStubServer(flink_rest) as stub:
        failure = latest_failure(f"127.0.0.1:{stub.port}", JOB)
    assert failure == (
        9,
        "pemja.core.PythonException: <class 'ValueError'>: bad "
        "(at /src/operators/agent_operator.open(agent_operator.py:173))",
    )


def test_unreachable_rest_api_gives_no_progress() -> None:
    with LoopbackStubServer() as stub:
        address = f"127.0.0.1:{stub.port}"
    assert read_progress(address, JOB) is None
    assert latest_failure(address, JOB) is None
