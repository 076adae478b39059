"""Generates the support-tickets example's sample data: tickets, orders, PNG and PDF files.

The files under `data/` are committed; this module is how they were made, and a test checks
they still match. Regenerate with `python -m streamagents.jobs.examples.sample_data`.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

__all__ = ["DATA_DIR", "sample_files", "write_sample_data"]

DATA_DIR = Path(__file__).resolve().parent / "data"


def png(width: int, height: int, background: tuple[int, int, int], boxes: list[tuple]) -> bytes:
    """A small RGB PNG: a background with filled boxes `(x0, y0, x1, y1, (r, g, b))`."""
    rows = []
    for y in range(height):
        row = bytearray([0])  # filter type: none
        for x in range(width):
            colour = background
            for x0, y0, x1, y1, fill in boxes:
                if x0 <= x < x1 and y0 <= y < y1:
                    colour = fill
            row.extend(colour)
        rows.append(bytes(row))

    def chunk(kind: bytes, payload: bytes) -> bytes:
        body = kind + payload
        return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


def pdf(lines: list[str]) -> bytes:
    """A one-page PDF showing `lines` of text in Helvetica."""
    text = "BT /F1 12 Tf 50 760 Td 16 TL " + " ".join(
        "(" + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj T*"
        for line in lines
    )
    stream = text + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        "/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


GREY, WHITE, RED, BLUE = (230, 230, 230), (255, 255, 255), (200, 30, 30), (40, 90, 200)


def _screenshot_cracked() -> bytes:
    return png(64, 40, GREY, [(4, 4, 60, 36, WHITE), (10, 18, 54, 21, RED), (30, 8, 33, 32, RED)])


def _screenshot_checkout_error() -> bytes:
    return png(64, 40, GREY, [(4, 4, 60, 12, BLUE), (4, 16, 60, 36, WHITE), (8, 22, 56, 30, RED)])


ORDERS = {
    "O-5521": {
        "status": "delivered",
        "items": [{"sku": "PHONE-X2", "name": "Phone X2", "qty": 1, "price_eur": 499.0}],
        "ordered": "2026-11-02",
        "delivered": "2026-11-05",
        "carrier": "DHL",
    },
    "O-6004": {
        "status": "in transit",
        "items": [{"sku": "CASE-07", "name": "Phone case", "qty": 2, "price_eur": 19.5}],
        "ordered": "2026-11-20",
        "tracking": "DHL 00340434161234567890",
        "expected": "2026-11-27",
    },
    "O-7310": {
        "status": "paid",
        "items": [{"sku": "HEAD-3", "name": "Headphones 3", "qty": 1, "price_eur": 129.0}],
        "ordered": "2026-11-24",
        "payments": [
            {"amount_eur": 129.0, "at": "2026-11-24T10:02:11Z"},
            {"amount_eur": 129.0, "at": "2026-11-24T10:02:13Z"},
        ],
    },
}


def _tickets() -> list[str]:
    screenshot = base64.b64encode(_screenshot_cracked()).decode("ascii")
    tickets = [
        {
            "id": "T-1001",
            "customer": {"id": "C-17", "name": "Ada"},
            "text": "My order O-5521 arrived with a cracked screen. Screenshot below.",
            "parts": [{"kind": "image", "mime_type": "image/png", "data": screenshot}],
            "channel": "email",
        },
        {
            "id": "T-1002",
            "customer": {"id": "C-17", "name": "Ada"},
            "text": "Following up on my last ticket: my invoice is attached as "
            "invoice-O-5521.pdf, please refund it to the card I paid with.",
            "channel": "email",
        },
        {
            "id": "T-1003",
            "customer": {"id": "C-42", "name": "Grace"},
            "text": "Checkout showed an error (see checkout-error.png) and order O-7310 was "
            "charged twice.",
            "channel": "chat",
        },
        {
            "id": "T-1004",
            "customer": {"id": "C-08", "name": "Linus"},
            "text": "Where is my order O-6004?",
            "channel": "chat",
        },
        {
            "id": "T-1005",
            "customer": {"id": "C-42", "name": "Grace"},
            "text": "Also, I cannot find order O-9999 in my account.",
            "channel": "chat",
        },
    ]
    lines = [json.dumps(ticket, separators=(",", ":")) for ticket in tickets]
    # Two bad inputs, to show dead letters: truncated JSON, and a ticket without a customer.
    lines.insert(3, '{"id":"T-1006","customer":{"id":"C-23"},"text":"My package never arr')
    lines.append('{"id":"T-1007","text":"This ticket has no customer field."}')
    return lines


def sample_files() -> dict[str, bytes]:
    """Every sample file, by path relative to `data/`."""
    return {
        "tickets/tickets.jsonl": ("\n".join(_tickets()) + "\n").encode(),
        "orders.json": (json.dumps(ORDERS, indent=2) + "\n").encode(),
        "attachments/checkout-error.png": _screenshot_checkout_error(),
        "attachments/invoice-O-5521.pdf": pdf(
            [
                "Invoice O-5521",
                "Date: 2026-11-02   Customer: C-17 (Ada)",
                "1 x Phone X2 ............ 499.00 EUR",
                "Paid by card ending 4242",
            ]
        ),
    }


def write_sample_data(root: Path = DATA_DIR) -> None:
    """Write the sample files under `root`."""
    for relative, content in sample_files().items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


if __name__ == "__main__":
    write_sample_data()
