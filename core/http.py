"""Small HTTP helpers shared by our outbound clients (Polymarket, model endpoints)."""

import email.utils
import math
from datetime import UTC, datetime

from core import clock


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), never negative;
    None when absent or unreadable. Callers cap it: a server may not park us for an hour."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or clock.now())).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)
