"""`streamagents try SPEC --input '{...}'`: one input through the spec's agent, without Flink.

The input goes through the real engine, model and tools (`streamagents.testing.AgentHarness`
on the in-memory port); each step is printed as it happens — the input, each model request
and reply, each tool call and result — then the answer. The loop a prompt author lives in:
change the prompt or a tool, try again, in about a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from streamagents.jobs.model_choice import demo_banner
from streamagents.jobs.spec import SpecError, check_runnable, load_spec
from streamagents.operators.agent.records import InputError
from streamagents.serde.safe_text import clip
from streamagents.testing.harness import AgentHarness, Answer, Emitted, HarnessError

__all__ = ["describe_event", "register"]

_SHOWN = 160
"""Characters of a text shown on a step's line."""


def register(subparsers: Any) -> None:
    """Add the `try` sub-command."""
    command = subparsers.add_parser(
        "try",
        help="Run one input through a spec's agent (real engine, model and tools; no Flink), "
        "printing each step as it happens.",
    )
    command.add_argument("spec", help="Path of the YAML job spec.")
    command.add_argument(
        "--input",
        required=True,
        metavar="JSON",
        help="The input line: a JSON object with the spec's key field and `text`.",
    )
    command.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="Seconds the input may take."
    )
    command.set_defaults(handler=_try)


def _try(args: argparse.Namespace) -> int:
    """Exit 0 for an ok answer, 1 for an error or a dead letter, 2 when it cannot start."""
    try:
        loaded = load_spec(args.spec)
        check_runnable(loaded)
    except SpecError as exc:
        print(f"invalid job spec:\n{exc}", file=sys.stderr)
        return 2
    if loaded.model.provider == "demo":
        print(demo_banner(loaded.model), file=sys.stderr)
    with AgentHarness.from_loaded(loaded, timeout_s=args.timeout) as agent:
        try:
            record = agent.runtime.parse(args.input)
        except InputError as exc:
            print(f"invalid input: {exc}", file=sys.stderr)
            return 2
        answer = Answer(record.id)
        started = time.monotonic()
        try:
            for emitted in agent.steps(args.input):
                answer.add(emitted)
                _print_step(emitted, time.monotonic() - started)
        except HarnessError as exc:
            print(f"no answer: {exc}", file=sys.stderr)
            return 1
    return _print_answer(answer)


def _print_step(emitted: Emitted, elapsed_s: float) -> None:
    """One line per run event, as it is emitted."""
    if emitted.channel != "events":
        return
    event = emitted.record
    print(f"{elapsed_s:7.3f} s  {event['event_type']:<18} {describe_event(event)}", flush=True)


def describe_event(event: dict[str, Any]) -> str:
    """A run event in one line: what went in or came out at that step."""
    payload, kind = event["payload"], event["event_type"]
    if kind == "output":
        return str((payload.get("attributes") or {}).get("status", ""))
    if kind in ("input", "chat_response"):
        texts = [_message_text(m) for m in payload.get("messages") or []]
        return clip(" | ".join(t for t in texts if t), _SHOWN)
    if kind == "chat_request":
        tools = (payload.get("attributes") or {}).get("tools")
        return f"model {payload.get('model')}" + (f", tools {tools}" if tools else "")
    if kind == "tool_request":
        return "; ".join(_call(call) for call in payload.get("tool_calls") or [])
    if kind == "tool_response":
        results = payload.get("tool_results") or []
        return "; ".join(
            f"{r.get('name')} -> {'error: ' * bool(r.get('is_error'))}"
            + clip(str(r.get("content", "")), _SHOWN)
            for r in results
        )
    if kind == "error":
        return clip(f"{payload.get('error_class')}: {payload.get('error_message')}", _SHOWN)
    return ""


def _message_text(message: dict[str, Any]) -> str:
    """A message's text, its parts by kind, and the tool calls it asks for."""
    pieces = [str(message.get("content") or "")]
    pieces += [f"[{part.get('kind', 'part')}]" for part in message.get("parts") or []]
    pieces += [f"calls {_call(call)}" for call in message.get("tool_calls") or []]
    return " ".join(piece for piece in pieces if piece)


def _call(call: dict[str, Any]) -> str:
    """A tool call as `name({arguments})`, clipped."""
    arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
    return f"{call.get('name')}({clip(arguments, _SHOWN)})"


def _print_answer(answer: Answer) -> int:
    """The answer (or the dead letter) after the steps; the exit code it means."""
    if answer.approval_requests:
        for request in answer.approval_requests:
            print(f"\nwaits for approval: {_call({**request, 'name': request['tool']})}")
        return 0
    output = answer.output
    if output is not None and output.get("status") == "ok":
        usage = output.get("usage") or {}
        tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
        print(
            f"\nanswer (model calls: {output['model_calls']}, tool calls: "
            f"{output['tool_calls']}, tokens: {tokens}, {output['latency_ms']} ms):"
        )
        print(output.get("text", ""))
        return 0
    letter = answer.dead_letter or {}
    error = (output or {}).get("error") or {}
    reason = letter.get("reason") or error.get("message") or "no output"
    kind = letter.get("error_type") or error.get("type") or "error"
    print(f"\nno answer: {kind}: {reason}")
    return 1
