"""Tools the runtime tests load by import path ("runtime_tools:camera"), and the order tools
the engine's state machines give their agent (`lookup`, `refund` that waits for approval)."""

from __future__ import annotations

import hashlib

from streamagents.operators.agent.tools import tool
from streamagents.serde.messages import ImagePart

PNG = b"\x89PNG\r\n\x1a\n" + hashlib.sha256(b"camera").digest() * 4096  # ~128 KiB


@tool
def camera(name: str) -> list:
    """Take a picture with one of the cameras.

    Args:
        name: Which camera, e.g. "north".
    """
    return [f"picture from {name}", ImagePart(data=PNG, mime_type="image/png")]


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: Order number.
    """
    return f"{order} delivered"


@tool(requires_approval=True, approval_timeout_s=60)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: Order number.
    """
    return f"refunded {order}"
