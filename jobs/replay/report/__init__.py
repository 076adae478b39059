"""Compare a candidate's runs with the recorded ones: the replay report and its gates.

`load_runs` reads the runs of event logs by (key, input id); `compare` pairs two run sets
and says per input how the candidate differs; `judge` asks a model which answer is better,
in both orders; `write_report` writes `comparison.jsonl`, `summary.json` and `report.html`;
`check_gates` checks `--fail-if` expressions on a summary; `run_report` does it all and
returns the exit code (`streamagents replay-report`, and `streamagents replay` after its job).
"""

from streamagents.jobs.replay.report.diff import (
    DIFFERENCE_KINDS,
    Comparison,
    InputComparison,
    JudgeVerdict,
    compare,
)
from streamagents.jobs.replay.report.gates import (
    GATE_METRICS,
    Gate,
    GateError,
    check_gates,
    parse_gate,
)
from streamagents.jobs.replay.report.judge import judge, judge_model, load_judge_spec
from streamagents.jobs.replay.report.report import Report, run_report, write_report
from streamagents.jobs.replay.report.runs import RunOutcome, RunSet, load_runs
from streamagents.jobs.replay.report.summary import summarize

__all__ = [
    "DIFFERENCE_KINDS",
    "GATE_METRICS",
    "Comparison",
    "Gate",
    "GateError",
    "InputComparison",
    "JudgeVerdict",
    "Report",
    "RunOutcome",
    "RunSet",
    "check_gates",
    "compare",
    "judge",
    "judge_model",
    "load_judge_spec",
    "load_runs",
    "parse_gate",
    "run_report",
    "summarize",
    "write_report",
]
