"""How long the SDK worker process takes to start: `SdkProcessModel.prepare()` (the worker
spawned, its adapter unpickled, its SDK imported, ready) for each provider.

The agent function's `open()` waits for this when a TaskManager's Python first starts a
worker for a kind of model (each start here is measured as such a first one).

Run: `python benchmarks/bench_worker_start.py [--runs N]`; prints the median and each run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from streamagents.connectors.providers import PROVIDERS, create_model, sdk_process
from streamagents.connectors.providers.sdk_process import SdkProcessModel


def start_s(provider: str) -> float:
    """Seconds from nothing to a worker ready to send for `provider`; the worker is killed."""
    model = SdkProcessModel(create_model(provider, "m", api_key="k", base_url="http://127.0.0.1:9"))
    sdk_process._loaded.clear()  # else prepare() does not wait for a kind it has seen
    started = time.perf_counter()
    model.prepare()
    elapsed = time.perf_counter() - started
    asyncio.run(model.aclose())  # a worker attached to no loop is killed
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="starts per provider")
    args = parser.parse_args()
    for provider in sorted(PROVIDERS):
        times = [start_s(provider) for _ in range(args.runs)]
        runs = " ".join(f"{t:.2f}" for t in times)
        print(f"{provider:22s} median {statistics.median(times):.2f} s   runs: {runs}")


if __name__ == "__main__":
    main()
