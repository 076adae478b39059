"""Parked runs: the keyed state a run waiting for an approval costs, per run, for N runs.

Run: `python benchmarks/bench_parked.py [--runs N]`. N support-desk runs (a ticket of about
300 characters, a model turn calling `refund`, which needs approval) are driven through
the agent runtime until they park; the figure is the run's value in keyed state (the
`run` state the engine writes: the RunState JSON), side by side with the same run while
its first model call is pending, the settled-approval entry a key keeps afterwards, and an
input queued behind a parked run (the raw line in the key's queue), with what a key holds
at most at the default `max_inputs_per_parked_key`.
A parked run holds no call slot, thread or coroutine in the engine (no entry in its
loop), so keyed state is all it costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.connectors.providers import ChatModel
from streamagents.operators.agent import AgentConfig, AgentRuntime, ModelSpec, ToolRegistry, tool
from streamagents.serde.chat import ChatResponse, TokenUsage, ToolSpec
from streamagents.serde.messages import ChatMessage, ToolCall

TICKET = (
    "Hello, my order {order} arrived yesterday but the blue kettle in it has a cracked lid "
    "and leaks when I fill it. I attached nothing because the photo upload failed twice. "
    "Could you refund the kettle, or send a new lid? I would prefer the refund. Thanks, Sam"
)


@tool(requires_approval=True)
def refund(order_id: str, amount_eur: float) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
        amount_eur: The amount in euros.
    """
    return "refunded"


class RefundCallingTestModel(ChatModel):
    """Test double: always answers with one `refund` call for the ticket's order."""

    provider = "refund-calling-test-double"

    async def achat(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), **options: Any
    ) -> ChatResponse:
        order = messages[-1].content.split()[4]
        call = ToolCall(id="call-0", name="refund", arguments={"order_id": order, "amount_eur": 49})
        text = "The kettle lid is cracked; I will refund it once a colleague approves."
        return ChatResponse(
            message=ChatMessage(role="assistant", content=text, tool_calls=[call]),
            usage=TokenUsage(input_tokens=180, output_tokens=40),
        )

    async def aclose(self) -> None:
        """Nothing to close."""


def main() -> None:
    """Park N runs and print the state each costs."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        config = AgentConfig(
            job_id="support-desk",
            model=ModelSpec(provider="test", model="refund-calling"),
            media_store=folder,
        )
        runtime = AgentRuntime(
            config, RefundCallingTestModel(), ToolRegistry([refund]), MediaStore(folder)
        )
        threads = threading.active_count()
        pending: list[int] = []
        parked: list[int] = []
        started = time.perf_counter()
        now = int(time.time() * 1000)
        settled = b""
        for n in range(args.runs):
            line = json.dumps({"id": f"t-{n}", "key": f"c-{n}", "text": TICKET.format(order=n)})
            step = runtime.start(runtime.parse(line), [], now)
            assert step.state is not None
            pending.append(len(step.state.model_dump_json().encode()))
            outcome = asyncio.run(runtime.perform(step.state, []))
            step = runtime.advance(step.state, outcome, now, [])
            assert step.state is not None and step.state.parked
            parked.append(len(step.state.model_dump_json().encode()))
            approval = step.state.pending.approvals[0]
            settled = approval.call_id.encode() + b"approve:0123456789abcdef"
        elapsed = time.perf_counter() - started
        line = json.dumps({"id": "t-1", "key": "c-0", "text": TICKET.format(order=0)})
        queued = len(line.encode()) + 8  # the queue's map entry: a long position and the line
        bound = config.max_inputs_per_parked_key
    print(f"{args.runs} parked runs, Python {platform.python_version()}, {platform.machine()}")
    print(f"  run state while its model call is pending: {statistics.mean(pending):7.0f} B/run")
    print(
        f"  run state while parked for an approval:    {statistics.mean(parked):7.0f} B/run "
        f"(min {min(parked)}, max {max(parked)})"
    )
    print(f"  all {args.runs} parked runs:                {sum(parked) / 1024:7.0f} KiB")
    print(f"  settled-approval entry kept per decision:  {len(settled):7d} B (key + value)")
    print(f"  input queued behind a parked run:          {queued:7d} B")
    most = (max(parked) + (bound - 1) * queued) / 1024
    print(f"  a parked key at max_inputs_per_parked_key={bound}: {most:5.1f} KiB at most")
    print(f"  threads before/after parking:             {threads} / {threading.active_count()}")
    print(f"  time to park each run (runtime only):      {elapsed / args.runs * 1000:7.2f} ms")


if __name__ == "__main__":
    main()
