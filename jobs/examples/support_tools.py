"""Tools of the support examples: fetch a ticket's attachment, look up an order, refund one.

`refund` needs a person's approval before it runs (the support-desk example), and is
idempotent per order: an approved call may run again after a failure (see
docs/approvals.md), so it refunds an order at most once, whatever the number of calls.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from streamagents.operators.agent.tools import tool
from streamagents.serde.messages import DocumentPart, ImagePart

__all__ = ["fetch_attachment", "lookup_order", "refund"]

_DATA = Path(__file__).resolve().parent / "data"
_NAME = re.compile(r"^[\w][\w.-]*$")
_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".pdf": "application/pdf"}


def fetch_attachment(name: str) -> ImagePart | DocumentPart:
    """Fetch a file attached to a support ticket: a screenshot (image) or a document (PDF).

    Args:
        name: The attachment's file name as the ticket gives it, e.g. "invoice-O-5521.pdf".
    """
    path = _DATA / "attachments" / name
    if not _NAME.match(name) or not path.is_file():
        raise FileNotFoundError(f"no attachment named {name!r}")
    mime_type = _TYPES.get(path.suffix.lower())
    if mime_type is None:
        raise ValueError(f"attachment {name!r} is neither an image nor a PDF")
    if mime_type == "application/pdf":
        return DocumentPart(data=path.read_bytes(), mime_type=mime_type)
    return ImagePart(data=path.read_bytes(), mime_type=mime_type)


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its number: status, items, dates, payments and tracking.

    Args:
        order_id: The order number, e.g. "O-5521".
    """
    orders = json.loads((_DATA / "orders.json").read_text(encoding="utf-8"))
    order = orders.get(order_id.strip().upper())
    if order is None:
        return {"order_id": order_id, "found": False}
    return {"order_id": order_id, "found": True, **order}


@tool(requires_approval=True)
def refund(order_id: str, amount_eur: float) -> dict[str, Any]:
    """Refund part or all of an order to the customer's payment method.

    Needs a person's approval. Idempotent: an order already refunded is not refunded again.

    Args:
        order_id: The order number, e.g. "O-5521".
        amount_eur: The amount to refund, in euros.
    """
    if not 0 < amount_eur <= 10_000:
        raise ValueError("amount_eur must be above 0 and at most 10000")
    ledger = Path(os.environ.get("SUPPORT_DESK_REFUNDS", _DATA.parent / "out/support_desk/refunds"))
    ledger.mkdir(parents=True, exist_ok=True)
    entry = ledger / f"{re.sub(r'[^A-Za-z0-9-]', '_', order_id.strip().upper())}.json"
    try:  # create-exclusive: of two calls for one order, one refunds
        with entry.open("x", encoding="utf-8") as file:
            json.dump({"order_id": order_id, "amount_eur": amount_eur}, file)
    except FileExistsError:
        done = json.loads(entry.read_text(encoding="utf-8") or "{}")
        return {"order_id": order_id, "refunded": False, "already_refunded": done}
    return {"order_id": order_id, "refunded": True, "amount_eur": amount_eur}
