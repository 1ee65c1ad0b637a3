"""Price history from Polymarket's CLOB (`GET /prices-history`), to back-fill a market we
started tracking late, or one whose history we want before it ages out upstream.

Quirks handled: `market` is a CLOB *token id*, not the condition id;
long explicit windows get HTTP 400 "interval is too long", so windows are fetched in chunks
and a refused chunk is split in two; closed markets only return data at fidelity >= 720
minutes; `p` is a JSON number; gaps are common.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from markets.gamma import GammaClientError, JsonHttpClient, parse_price

log = logging.getLogger(__name__)

CHUNK = timedelta(days=14)  # what public clients use at daily fidelity without a 400
MIN_CHUNK = timedelta(hours=6)  # stop splitting a refused window below this
CLOSED_MARKET_FIDELITY = 720  # minutes; finer returns [] for closed markets


class ClobClient(JsonHttpClient):
    default_base_setting = "ARENA_CLOB_URL"

    def prices_history(
        self, token_id: str, *, start: datetime, end: datetime, fidelity: int = 60
    ) -> list[tuple[datetime, Decimal]]:
        """(time, price) points for one outcome token between start and end, oldest first.
        Points that are not a valid probability are dropped (logged)."""
        points: dict[int, Decimal] = {}
        cursor = start
        while cursor < end:
            chunk_end = min(cursor + CHUNK, end)
            self._fetch_window(token_id, cursor, chunk_end, fidelity, points)
            cursor = chunk_end
        return [(datetime.fromtimestamp(t, UTC), p) for t, p in sorted(points.items())]

    def _fetch_window(
        self, token_id: str, start: datetime, end: datetime, fidelity: int, into: dict
    ) -> None:
        params = {
            "market": token_id,
            "startTs": int(start.timestamp()),
            "endTs": int(end.timestamp()),
            "fidelity": fidelity,
        }
        try:
            body = self._get_json("/prices-history", params, shape=_is_history)
        except GammaClientError as exc:
            too_long = exc.status == 400 and "too long" in exc.body.lower()
            if not too_long or end - start <= MIN_CHUNK:
                raise
            middle = start + (end - start) / 2  # split the refused window and try each half
            self._fetch_window(token_id, start, middle, fidelity, into)
            self._fetch_window(token_id, middle, end, fidelity, into)
            return
        for point in body["history"]:
            try:
                t = point["t"]
                if isinstance(t, bool) or not isinstance(t, int):
                    raise ValueError(f"t {t!r} is not unix seconds")
                into[t] = parse_price(point["p"])
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("token %s: dropping history point %r: %s", token_id[:12], point, exc)


def _is_history(body) -> bool:
    return isinstance(body, dict) and isinstance(body.get("history"), list)
