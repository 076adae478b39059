"""The program `streamagents submit` hands to `flink run -py`: builds a spec's job and submits it.

It runs in the Python process the Flink CLI starts, so it re-reads the spec there; secrets
come from that process's environment, never from its arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyflink.datastream import StreamExecutionEnvironment

from streamagents.jobs.graph import build_job, flink_configuration
from streamagents.jobs.model_choice import model_spec
from streamagents.jobs.spec import load_spec

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Build the job of `--spec` in the Flink CLI's environment and execute it."""
    parser = argparse.ArgumentParser(prog="streamagents-flink-entry")
    parser.add_argument("--spec", required=True, help="Path of the YAML job spec.")
    parser.add_argument("--demo-url", default=None, help="URL of the running demo model stub.")
    parser.add_argument(
        "--hold-input-end",
        action="store_true",
        help="Hold a bounded input open; the submitting command ends the job when answered.",
    )
    args = parser.parse_args(argv)
    loaded = load_spec(args.spec)
    env = StreamExecutionEnvironment.get_execution_environment(flink_configuration(loaded.spec))
    build_job(
        env, loaded, model_spec(loaded.model, args.demo_url), hold_input_end=args.hold_input_end
    )
    env.execute(loaded.spec.name)


if __name__ == "__main__":
    main()
