"""DEMO / TEST DOUBLE: scripted replies for the support-tickets example, on Gemini's wire.

This is not a model and never pretends to be one. It is a `LoopbackStubServer` responder
that answers `generateContent` requests the way the Gemini API would, from rules: on a
ticket it calls `lookup_order` for each order number and `fetch_attachment` for each file
name in the text, and `refund` (when the agent has it) for a ticket asking for a refund of
an amount in euros, and `track_shipment` for each tracking number (T-0000); when a tracked
parcel is not delivered yet and the agent has `schedule_followup`, it schedules a check
30 s later; once the tool results are back it writes an answer that says what it saw
(order status, media types and sizes, where a parcel is, when it checks again). Every
answer starts with `DEMO_PREFIX`. It lets the example run end to end — real google-genai
SDK, real adapter, real operator, real tools — on a machine without an API key.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

from streamagents.connectors.loopback_stub import RecordedRequest, StubReply

__all__ = ["DEMO_PREFIX", "respond"]

DEMO_PREFIX = "[DEMO MODEL - scripted test double on 127.0.0.1, not an LLM]"

_ORDER = re.compile(r"\bO-\d{4}\b")
_TRACKING = re.compile(r"\bT-\d{4}\b")
_RECHECK_S = 30.0
_FILE = re.compile(r"\b[\w-]+\.(?:png|jpe?g|pdf)\b", re.IGNORECASE)
_REFUND = re.compile(r"\brefund\b.*?(\d+(?:\.\d+)?) ?(?:EUR|euros?)", re.IGNORECASE)
_SIGNATURE = base64.b64encode(b"demo-thought-signature").decode("ascii")


def _get(mapping: dict[str, Any], camel: str, snake: str) -> Any:
    """A field in either spelling: the SDK sends some nested keys in snake_case."""
    return mapping.get(camel, mapping.get(snake))


def _media_size(data: str) -> int:
    return len(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))


def _media_in(part: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """(mime type, size) of each inline media blob in a part, nested ones included."""
    blob = _get(part, "inlineData", "inline_data")
    if isinstance(blob, dict):
        yield _get(blob, "mimeType", "mime_type") or "?", _media_size(blob.get("data", ""))
    response = _get(part, "functionResponse", "function_response")
    if isinstance(response, dict):
        for nested in response.get("parts") or []:
            yield from _media_in(nested)


def _declared_tools(body: dict[str, Any]) -> set[str]:
    names = set()
    for entry in body.get("tools") or []:
        for declaration in _get(entry, "functionDeclarations", "function_declarations") or []:
            names.add(declaration.get("name"))
    return names


def _reply(parts: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": len(json.dumps(body)) // 4,
            "candidatesTokenCount": sum(len(json.dumps(p)) for p in parts) // 4,
        },
        "modelVersion": "support-demo",
    }


def _tool_calls(text: str, tools: set[str]) -> list[dict[str, Any]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    if "lookup_order" in tools:
        calls += [("lookup_order", {"order_id": o}) for o in dict.fromkeys(_ORDER.findall(text))]
    if "fetch_attachment" in tools:
        calls += [("fetch_attachment", {"name": f}) for f in dict.fromkeys(_FILE.findall(text))]
    if "track_shipment" in tools:
        calls += [
            ("track_shipment", {"tracking_id": t}) for t in dict.fromkeys(_TRACKING.findall(text))
        ]
    refund = _REFUND.search(text)
    orders = _ORDER.findall(text)
    if "refund" in tools and refund is not None and orders:
        calls.append(("refund", {"order_id": orders[0], "amount_eur": float(refund.group(1))}))
    return _function_calls(calls)


def _function_calls(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {
            "functionCall": {"id": f"demo-call-{i}", "name": name, "args": args},
            "thoughtSignature": _SIGNATURE,
        }
        for i, (name, args) in enumerate(calls, start=1)
    ]


def _payload(response: dict[str, Any]) -> Any:
    """A function response's result: the JSON a tool returned, parsed when it is JSON."""
    for key in ("result", "output", "content"):
        if isinstance(response.get(key), str):
            try:
                return json.loads(response[key])
            except ValueError:
                return response[key]
    return response


def _rechecks(last: dict[str, Any], tools: set[str]) -> list[dict[str, Any]]:
    """`schedule_followup` calls for the tracked parcels not delivered yet (when the agent
    has the tool): check again in 30 s."""
    if "schedule_followup" not in tools:
        return []
    calls = []
    for part in last.get("parts", []):
        response = _get(part, "functionResponse", "function_response")
        if not isinstance(response, dict) or response.get("name") != "track_shipment":
            continue
        payload = _payload(response.get("response") or {})
        if isinstance(payload, dict) and payload.get("found") and payload["status"] != "delivered":
            note = f"Check shipment {payload['tracking_id']} again and tell the customer."
            calls.append(("schedule_followup", {"after_s": _RECHECK_S, "note": note}))
    return _function_calls(calls)


def _describe_result(name: str, response: dict[str, Any]) -> str:
    payload = _payload(response)
    if name == "lookup_order" and isinstance(payload, dict):
        order = payload.get("order_id", "?")
        if payload.get("found") is False:
            return f"order {order} was not found"
        return f"order {order} is {payload.get('status', 'in an unknown state')}"
    if name == "fetch_attachment":
        return "the attachment was fetched"
    if name == "refund":
        if isinstance(payload, dict) and payload.get("refunded"):
            return f"{payload.get('amount_eur')} EUR refunded on {payload.get('order_id')}"
        if isinstance(payload, dict):
            return f"no new refund on {payload.get('order_id')} (already refunded)"
        return f"the refund was not made: {payload}"
    if name == "track_shipment" and isinstance(payload, dict):
        parcel = payload.get("tracking_id", "?")
        if not payload.get("found"):
            return f"shipment {parcel} was not found"
        eta = f", expected {payload['eta']}" if payload.get("eta") else ""
        return f"shipment {parcel} is {payload.get('status')} ({payload.get('where')}{eta})"
    if name == "schedule_followup":
        if isinstance(payload, dict) and payload.get("scheduled"):
            return f"I will check again at {payload.get('due_at')}"
        return f"no follow-up was scheduled: {payload}"
    return f"{name} answered"


def _answer(contents: list[dict[str, Any]]) -> str:
    """The final answer, built from the ticket and the tool results that came back since."""
    start = next(
        (
            i
            for i in range(len(contents) - 1, -1, -1)
            if contents[i].get("role") == "user"
            and not any(
                _get(p, "functionResponse", "function_response") for p in contents[i]["parts"]
            )
        ),
        len(contents),
    )
    ticket = contents[start] if start < len(contents) else {"parts": []}
    text = " ".join(p.get("text", "") for p in ticket.get("parts", []) if "text" in p).strip()
    findings = [
        f"media in the ticket: {mime} ({size} bytes)"
        for part in ticket.get("parts", [])
        for mime, size in _media_in(part)
    ]
    for content in contents[start + 1 :]:
        if content.get("role") != "user":
            continue
        for part in content.get("parts", []):
            response = _get(part, "functionResponse", "function_response")
            if isinstance(response, dict):
                name = response.get("name", "?")
                findings.append(_describe_result(name, response.get("response")))
            findings += [f"{mime} received ({size} bytes)" for mime, size in _media_in(part)]
    seen = "; ".join(findings) if findings else "no orders or attachments mentioned"
    summary = text[:80] + ("..." if len(text) > 80 else "")
    return (
        f"{DEMO_PREFIX} Ticket: {summary!r}. What I checked: {seen}. "
        "Next step: a human agent confirms and replies to the customer."
    )


def respond(request: RecordedRequest) -> StubReply | dict[str, Any]:
    """Answer one Gemini `generateContent` request: tool calls first, then a final answer."""
    if ":generateContent" not in request.path:
        message = f"demo model: unsupported path {request.path}"
        return StubReply({"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}, 404)
    body = request.json or {}
    contents = body.get("contents") or []
    last = contents[-1] if contents else {"parts": []}
    answering_tools = any(
        _get(p, "functionResponse", "function_response") for p in last.get("parts", [])
    )
    tools = _declared_tools(body)
    if not answering_tools:
        text = " ".join(p.get("text", "") for p in last.get("parts", []) if "text" in p)
        calls = _tool_calls(text, tools)
        if calls:
            return _reply(calls, body)
    else:
        rechecks = _rechecks(last, tools)
        if rechecks:
            return _reply(rechecks, body)
    return _reply([{"text": _answer(contents)}], body)
