"""The tool of the shipment-watch example: track a parcel in a recorded carrier feed.

`data/watch/tracking.json` stands in for a carrier's API: per tracking number, the scans a
carrier would report over time. Each check of a shipment reveals its next scan (the last
one stays), so the example's follow-up run, which checks again later, sees the parcel move
on. The checks made so far are counted in one file per shipment under
`out/shipment_watch/checks` (or `$SHIPMENT_WATCH_CHECKS`); delete it to replay the feed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["track_shipment"]

_DATA = Path(__file__).resolve().parent / "data"
_TRACKING = re.compile(r"^T-\d{4}$")


def _checks_dir() -> Path:
    default = _DATA.parent / "out/shipment_watch/checks"
    return Path(os.environ.get("SHIPMENT_WATCH_CHECKS", default))


def track_shipment(tracking_id: str) -> dict[str, Any]:
    """Track a parcel: its carrier, latest scan (status, where, estimated delivery).

    Args:
        tracking_id: The tracking number, e.g. "T-4821".
    """
    tracking_id = tracking_id.strip().upper()
    feed = json.loads((_DATA / "watch" / "tracking.json").read_text(encoding="utf-8"))
    shipment = feed.get(tracking_id) if _TRACKING.match(tracking_id) else None
    if shipment is None:
        return {"tracking_id": tracking_id, "found": False}
    checks = _checks_dir()
    checks.mkdir(parents=True, exist_ok=True)
    counter = checks / f"{tracking_id}.count"
    seen = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(seen + 1))
    scans = shipment["scans"]
    scan = scans[min(seen, len(scans) - 1)]
    return {"tracking_id": tracking_id, "found": True, "carrier": shipment["carrier"], **scan}
