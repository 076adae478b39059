"""Human approval of tool calls: the rule a tool declares, the decision record, the parked call.

A tool that needs approval (`@tool(requires_approval=True)`, a predicate over the call's
arguments, or `approval: required` in YAML) is not called when the model asks for it:
its run parks with a `PendingApproval` per such call and emits an approval request. A
decision arrives later as an input line `{"<key field>": ..., "approval": {"call_id",
"decision": "approve" | "reject", "by", "comment", "arguments"?}}`; instead of the
`call_id` it may name the call by what the approval request shows: `"tool"` and,
optionally, `"match"`, arguments the call was asked with (`waiting_matches`), where the
tool allows it (`by_tool_name`); edited `arguments` count only where it allows edits
(`allow_edits`). An input line with a top-level `approval` field is always a decision,
never a run's input; which channel may carry decisions is the job's choice (`Takes`).
With a secret (`DecisionsConfig.secret`), a decision counts only with its `signature`,
the HMAC-SHA256 of the decision and its key (`decision_signature`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from streamagents.operators.agent.config import InputLimits
from streamagents.operators.agent.records import (
    InputError,
    InputRecord,
    decode_line,
    key_of,
    parse_input,
)

__all__ = [
    "DECISION_PREFIX",
    "ApprovalDecision",
    "PendingApproval",
    "Takes",
    "decision_line",
    "decision_signature",
    "forgotten",
    "is_decision_line",
    "parse_line",
    "read_decision_line",
    "settled_entry",
    "settled_fingerprint",
    "waiting_matches",
]

DECISION_PREFIX = '{"approval":'
"""How every decision line the parse step passes on starts (see `decision_line`)."""

_MAX_TEXT = 2000

Takes = Literal["inputs", "decisions", "both"]
"""What a channel's lines may be: run inputs only (the main input, by default), decisions
only (the approvals source), or both (the main input with `decisions.from_input`)."""

_UNTRUSTED = (
    "a line with a top-level `approval` field is a decision, and this channel takes none: "
    "decisions come from the job's approvals source only, or from the main input when the "
    "job has no approvals source and sets agent.decisions.from_input: true "
    "(see docs/approvals.md)"
)


class ApprovalDecision(BaseModel):
    """A person's decision on one parked tool call, as it arrives on the input."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    call_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="The `call_id` of the approval request (or name the call by `tool`).",
    )
    tool: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Instead of `call_id`: the tool of the key's one waiting call to decide.",
    )
    match: dict[str, Any] | None = Field(
        default=None,
        description="With `tool`: arguments the call was asked with (equal values), to tell "
        "the key's waiting calls of that tool apart.",
    )
    decision: Literal["approve", "reject"] = Field(description="approve or reject.")
    by: str = Field(default="", max_length=256, description="Who decided.")
    comment: str = Field(default="", max_length=_MAX_TEXT, description="Why, for the model.")
    arguments: dict[str, Any] | None = Field(
        default=None, description="Edited arguments to call the tool with (approve only)."
    )
    signature: str | None = Field(
        default=None,
        max_length=128,
        description="The HMAC-SHA256 of the decision and its key (`decision_signature`), "
        "when the job signs decisions.",
    )

    @model_validator(mode="after")
    def _names_its_call(self) -> ApprovalDecision:
        if (self.call_id is None) == (self.tool is None):
            raise ValueError("name the call by its call_id, or by its tool (and match), not both")
        if self.match is not None and self.tool is None:
            raise ValueError("match goes with tool, not with call_id")
        return self

    def matches(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether a call of `tool` with `arguments` is the one this decision names by tool
        and arguments."""
        given = self.match or {}
        return tool == self.tool and all(
            name in arguments and arguments[name] == value for name, value in given.items()
        )

    def fingerprint(self) -> str:
        """What makes two decisions the same one: the verdict and the arguments to use.

        A second decision with the same fingerprint is a duplicate (ignored); one with
        another is a conflict (a dead letter)."""
        arguments = json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(arguments.encode()).hexdigest()[:16]
        return f"{self.decision}:{digest}"


class PendingApproval(BaseModel):
    """One call of a parked turn that needs a decision, and what became of it."""

    model_config = ConfigDict(frozen=True)

    call_id: str = Field(
        description="The approval's id, which decisions name: the call's tool_request event "
        "id, unique per run and call (a model's own call ids may repeat across turns)."
    )
    tool_call_id: str = Field(description="The model's id of the call.")
    tool: str
    requested_ms: int
    deadline_ms: int
    status: Literal["waiting", "approved", "rejected", "expired"] = "waiting"
    fingerprint: str | None = Field(default=None, description="Of the decision taken, if any.")


def waiting_matches(
    decision: ApprovalDecision, waiting: Iterable[tuple[PendingApproval, dict[str, Any]]]
) -> list[str]:
    """The call ids of the waiting approvals (each with its call's arguments) that a
    decision naming its call by `tool` and `match` fits."""
    return [
        entry.call_id
        for entry, arguments in waiting
        if entry.status == "waiting" and decision.matches(entry.tool, arguments)
    ]


def is_decision_line(line: str) -> bool:
    """Whether a line the parse step passed on is a decision (see `decision_line`)."""
    return line.startswith(DECISION_PREFIX)


def decision_line(decision: ApprovalDecision, key: str) -> str:
    """The canonical line the parse step passes on for a decision: it starts with
    `DECISION_PREFIX`, which no run input can (an input with `approval` is a decision)."""
    return json.dumps(
        {"approval": decision.model_dump(exclude_none=True), "key": key}, ensure_ascii=False
    )


def decision_signature(key: str, approval: dict[str, Any], secret: str) -> str:
    """The signature of a decision (the `approval` object as sent, its `signature` aside)
    for `key`: the hex HMAC-SHA256, keyed by `secret`, of the UTF-8 canonical JSON
    `{"approval": {...}, "key": key}` (keys sorted, no spaces, non-ASCII as is)."""
    body = {name: value for name, value in approval.items() if name != "signature"}
    text = json.dumps(
        {"approval": body, "key": key}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


def parse_line(
    raw: str,
    key_field: str,
    limits: InputLimits | None = None,
    takes: Takes = "both",
    secret: str | None = None,
) -> InputRecord | tuple[str, ApprovalDecision]:
    """Parse an input line: a run's input (`InputRecord`), or `(key, decision)` when the line
    holds a top-level `approval` field; raises `InputError` naming the broken rule (never
    the values), and for a line its channel does not take (`takes`): an `UntrustedDecision`
    or `NotADecision`; with a `secret`, for a decision not signed with it (`BadSignature`)."""
    obj, size = decode_line(raw, limits)
    if not isinstance(obj, dict) or "approval" not in obj:
        if takes == "decisions":
            raise InputError(
                "the approvals source carries decisions only (lines with a top-level "
                "`approval` field); send run inputs on the main input",
                "NotADecision",
            )
        return parse_input(raw, key_field, limits, decoded=(obj, size))
    if takes == "inputs":
        raise InputError(_UNTRUSTED, "UntrustedDecision")
    key = key_of(obj, key_field, limits)
    value = obj["approval"]
    if not isinstance(value, dict):
        raise InputError(
            f"approval must be an object, not {type(value).__name__}", "InvalidDecision"
        )
    if secret is not None:
        signature = value.get("signature")
        expected = decision_signature(key, value, secret)
        if not isinstance(signature, str) or not hmac.compare_digest(signature, expected):
            raise InputError(
                "the decision is not signed with the job's decisions.secret (approval."
                "signature: the HMAC-SHA256 of the decision and its key, see "
                "docs/approvals.md); it was not applied",
                "BadSignature",
            )
    try:
        return key, ApprovalDecision.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            ".".join(["approval", *(str(p) for p in err["loc"])])
            + f": {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise InputError(f"invalid decision: {problems}", "InvalidDecision") from None


def read_decision_line(line: str) -> ApprovalDecision:
    """The decision of a canonical decision line (`decision_line`)."""
    return ApprovalDecision.model_validate(json.loads(line)["approval"])


def settled_entry(fingerprint: str, now_ms: int) -> str:
    """How a key remembers a settled approval: its fingerprint (or `expired`) and when."""
    return f"{fingerprint}@{now_ms}"


def settled_fingerprint(entry: str) -> str:
    """The fingerprint (or `expired`) of a `settled_entry`."""
    return entry.rpartition("@")[0]


def forgotten(entries: Iterable[tuple[str, str]], keep: int) -> list[str]:
    """The approval ids to forget so that the latest `keep` settled entries remain."""
    ordered = sorted(entries, key=lambda entry: int(entry[1].rpartition("@")[2]))
    return [call_id for call_id, _ in ordered[: max(0, len(ordered) - keep)]]
