"""Tools of the support-tickets example: fetch a ticket's attachment, look up an order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from streamagents.serde.messages import DocumentPart, ImagePart

__all__ = ["fetch_attachment", "lookup_order"]

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
