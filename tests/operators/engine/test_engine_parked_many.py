"""A thousand runs parked on approvals over a thousand keys, in the engine without Flink: no
thread, no call slot and no busy key, a bounded few KB of keyed state each, and every run
completes once approved, across a restore from a checkpoint taken while they all wait.

One scenario (the `parked` fixture) drives it all and records what it saw; each test
asserts one behaviour. `max_in_flight` is 16: were a parked run to hold its call slot, no
further call could start while the thousand wait. Every tenth input carries a 4 KB photo,
which the engine puts in the media store, not in keyed state.
"""

from __future__ import annotations

import base64
import json
import pickle
import threading
from collections import defaultdict
from typing import Any

import pytest
from e2e_tools import image_bytes
from engine_harness import OPEN, EngineHarness, harness

from streamagents.operators.agent import RunState, tool
from streamagents.operators.engine import PortSnapshot
from streamagents.testing import EchoTestModel

RUNS = 1000
FIRST = 20
MAX_IN_FLIGHT = 16
PARKED_RUN_BYTES = 1970
"""bench_parked's figure for a support-desk run parked on one approval (docs/approvals.md)."""
STATE_BOUND_PER_RUN = 2 * PARKED_RUN_BYTES
"""Serialized keyed state and timers a parked run may hold."""
PHOTO = base64.b64encode(image_bytes(5, 4096)).decode()

made: list[str] = []


@tool(requires_approval=True, approval_timeout_s=86_400)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: Order number.
    """
    made.append(order)
    return f"refunded {order}"


def ticket(h: EngineHarness, n: int) -> None:
    """Send run `n`'s input (on its own key), a refund that waits for approval."""
    line: dict[str, Any] = {"id": f"t-{n}", "key": f"c-{n}", "text": f"tool:refund PK{n}"}
    if n % 10 == 0:
        line["parts"] = [{"kind": "image", "mime_type": "image/png", "data": PHOTO}]
    h.send(f"c-{n}", json.dumps(line))


def park(h: EngineHarness, numbers: range) -> None:
    """Send the runs' inputs and let their model calls finish: each parks on its refund."""
    for n in numbers:
        ticket(h, n)
    h.settle_all()


def state_bytes(snapshot: PortSnapshot) -> dict[str, int]:
    """The serialized size (pickle) of every state and timer each key holds in `snapshot`."""
    held: dict[str, list[Any]] = defaultdict(list)
    for (name, key), value in snapshot.values.items():
        held[key].append((name, value))
    for (name, key), entries in snapshot.maps.items():
        held[key].append((name, entries))
    for timer in snapshot.timers:
        held[timer.key].append(timer)
    return {key: len(pickle.dumps(states)) for key, states in held.items()}


def busy(h: EngineHarness) -> dict[str, int]:
    """The engine's levels of what is running or waiting (its metrics)."""
    return {name: h.count(name) for name in ("in_flight", "busy_keys", "waiting_inputs")}


@pytest.fixture(scope="module")
def parked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Park 20 runs, then 980 more; start a call on a free key while they wait; checkpoint;
    fail over to the checkpoint; decide all 1,000. Returns what was seen on the way."""
    made.clear()
    root = tmp_path_factory.mktemp("parked-many")
    h = harness(
        root, EchoTestModel(), [refund], max_in_flight=MAX_IN_FLIGHT, offload_threshold_bytes=1024
    )
    OPEN.remove(h)  # module-scoped: closed here, not after the first test
    seen: dict[str, Any] = {}
    try:
        park(h, range(FIRST))
        seen["threads_few"] = threading.active_count()
        park(h, range(FIRST, RUNS))
        seen["threads_all"] = threading.active_count()
        seen["asks"] = h.approval_requests()
        seen["pending"] = [c.key for c in h.runner.pending]
        seen["levels"] = busy(h)
        seen["runs_started"] = h.count("runs_started")
        checkpoint = h.checkpoint()
        runs = [v for (name, _), v in checkpoint.state.values.items() if name == "run"]
        seen["parked_keys"] = sum(RunState.model_validate_json(run).parked for run in runs)
        sizes = state_bytes(checkpoint.state)
        seen["state"] = [sizes[f"c-{n}"] for n in range(RUNS)]
        seen["pickled"] = pickle.dumps(checkpoint.state)
        h.runner.slots_held = True  # a new call gets a slot only if one is free
        h.send_input("free", "f-1", "hello")
        seen["free_pending"] = [c.key for c in h.runner.pending]
        h.runner.slots_held = False
        h.settle_all()
        h.restore(checkpoint)  # the attempt fails while all 1,000 wait
        for n, ask in enumerate(seen["asks"], 1):
            h.decide(ask["key"], ask["call_id"])
            if n % 50 == 0:
                h.settle_all()  # the runner's calls in step with the slots a job would have
        h.settle_all()
        seen["outputs"] = h.outputs()
        seen["dead"] = h.dead_letters()
        seen["made"] = list(made)
        seen["levels_after"] = busy(h)
    finally:
        h.close()
    return seen


def test_parked_runs_hold_no_thread(parked: dict[str, Any]) -> None:
    print(f"threads with {FIRST} parked: {parked['threads_few']}, with {RUNS}: ", end="")
    print(parked["threads_all"])
    assert parked["threads_all"] <= parked["threads_few"]


def test_parked_runs_hold_no_call_slot_and_make_no_key_busy(parked: dict[str, Any]) -> None:
    assert parked["parked_keys"] == parked["runs_started"] == RUNS > MAX_IN_FLIGHT
    assert len({a["call_id"] for a in parked["asks"]}) == RUNS
    assert parked["pending"] == []
    assert parked["levels"] == {"in_flight": 0, "busy_keys": 0, "waiting_inputs": 0}
    assert parked["free_pending"] == ["free"]  # the 1,001st key's call starts at once


def test_each_parked_run_costs_a_bounded_few_kilobytes_of_state(parked: dict[str, Any]) -> None:
    sizes = parked["state"]
    print(f"keyed state: {sum(sizes) / RUNS:.0f} B per parked run (max {max(sizes)})")
    assert 200 < min(sizes) <= max(sizes) < STATE_BOUND_PER_RUN
    assert PHOTO[100:164].encode() not in parked["pickled"]  # the photos are in the media store
    assert image_bytes(5, 4096)[100:164] not in parked["pickled"]


def test_every_parked_run_completes_once_approved_and_nothing_is_lost(
    parked: dict[str, Any],
) -> None:
    outputs = parked["outputs"]
    assert parked["dead"] == []
    assert sorted(o["id"] for o in outputs) == sorted([*(f"t-{n}" for n in range(RUNS)), "f-1"])
    assert {o["text"] for o in outputs if o["id"] != "f-1"} == {
        f"done: refunded PK{n}" for n in range(RUNS)
    }
    assert sorted(parked["made"]) == sorted(f"PK{n}" for n in range(RUNS))  # each made once
    assert parked["levels_after"] == {"in_flight": 0, "busy_keys": 0, "waiting_inputs": 0}
