"""A seeded Polymarket world as Polymarket would show it at an instant: Gamma market objects and
CLOB price history built from the demo's plan, for a stand-in server that a rehearsal's sync,
marking and resolution read through the arena's real clients.

Nothing here reads a clock: every function takes the instant it describes, so the stand-in can
serve the world on whatever clock the rehearsal runs (an accelerated one, usually) and a test
can ask what any instant looked like. What a market shows never depends on anything later than
that instant, except its resolution once it is due — the same leak-free rule the demo follows.

The resolution timeline copies what EXTERNAL_APIS.md documents for UMA-resolved markets:
closed at `close_at` with trading prices still shown and status "proposed", then "resolved"
with final prices ["1", "0"], ["0", "1"] or ["0.5", "0.5"] (a 50-50) after RESOLVE_DELAY. The
plan's first decisive market is disputed: "proposed", "disputed", "proposed" again, and only
then resolved, DISPUTE_DELAY later, to the outcome the dispute argued for.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from simulations.demo_plan import HOUR, DemoPlan, MarketPlan

RESOLVE_DELAY = timedelta(hours=2)  # proposal and challenge window after the close
DISPUTE_DELAY = timedelta(days=2)  # how long the disputed market waits for its final answer
LIQUIDITY_SHARE = 0.05  # liquidity as a share of volume, for a plausible `liquidity` field


@dataclass(frozen=True)
class World:
    """The plan plus the one market whose resolution is disputed."""

    plan: DemoPlan
    disputed_key: str

    @classmethod
    def of(cls, plan: DemoPlan) -> World:
        decisive = [m for m in plan.markets if m.outcome and not m.group]
        first = min(decisive, key=lambda m: (m.close_at, m.key)) if decisive else None
        return cls(plan=plan, disputed_key=first.key if first else "")

    def listed(self, at: datetime) -> list[MarketPlan]:
        """Markets that exist upstream at `at` (opened already), by volume so far, largest first:
        the order of `/markets/keyset?order=volumeNum&ascending=false`."""
        shown = [m for m in self.plan.markets if m.open_at <= at]
        return sorted(shown, key=lambda m: (-volume_at(m, at), m.key))

    def by_key(self, key: str) -> MarketPlan | None:
        return next((m for m in self.plan.markets if m.key == key), None)

    def resolved_at(self, m: MarketPlan) -> datetime:
        delay = DISPUTE_DELAY if m.key == self.disputed_key else RESOLVE_DELAY
        return m.close_at + delay

    def statuses(self, m: MarketPlan, at: datetime) -> list[str]:
        """umaResolutionStatuses at `at`: empty while trading, the history after the close."""
        if at < m.close_at:
            return []
        if m.key == self.disputed_key:
            steps = [
                (m.close_at, "proposed"),
                (m.close_at + RESOLVE_DELAY, "disputed"),
                (m.close_at + DISPUTE_DELAY / 2, "proposed"),
                (self.resolved_at(m), "resolved"),
            ]
        else:
            steps = [(m.close_at, "proposed"), (self.resolved_at(m), "resolved")]
        return [status for since, status in steps if since <= at]

    def gamma_market(self, m: MarketPlan, at: datetime) -> dict:
        """One market object with Gamma's wire types: JSON inside strings, `volume` a string
        beside the number `volumeNum`, `closedTime` in its own non-ISO form, `active` true even
        when closed, unset fields omitted."""
        closed = at >= m.close_at
        statuses = self.statuses(m, at)
        volume = volume_at(m, at)
        market: dict = {
            "id": m.key,
            "question": m.question,
            "conditionId": _hex("condition", m.key),
            "slug": m.key,
            "description": m.description,
            "resolutionSource": "",
            "outcomes": json.dumps(["Yes", "No"]),
            "outcomePrices": json.dumps(self._prices(m, at, statuses)),
            "clobTokenIds": json.dumps([token_id(m.key, "Yes"), token_id(m.key, "No")]),
            "volume": repr(volume),
            "volumeNum": volume,
            "liquidity": repr(volume * LIQUIDITY_SHARE),
            "liquidityNum": volume * LIQUIDITY_SHARE,
            "active": True,
            "closed": closed,
            "acceptingOrders": not closed,
            "startDate": _iso(m.open_at),
            "endDate": _iso(m.close_at),
            "createdAt": _iso(m.open_at),
            "umaResolutionStatuses": json.dumps(statuses),
            "negRisk": bool(m.group),
            "groupItemTitle": m.item_title,
            "events": [_event(m, closed)],
            "tags": [{"id": m.category.lower(), "label": m.category}],
        }
        if closed:
            market["closedTime"] = m.close_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00")
        if statuses:
            market["umaResolutionStatus"] = statuses[-1]
            market["umaEndDate"] = _iso(
                self.resolved_at(m) if statuses[-1] == "resolved" else m.close_at
            )
        if m.group:
            market["negRiskMarketID"] = _hex("negrisk", m.group)
        return market

    def _prices(self, m: MarketPlan, at: datetime, statuses: list[str]) -> list[str]:
        if statuses and statuses[-1] == "resolved":
            return {"Yes": ["1", "0"], "No": ["0", "1"]}.get(m.outcome, ["0.5", "0.5"])
        yes = m.price_at(min(at, m.close_at))
        if yes is None:  # not listed before it opens; callers filter, this keeps types honest
            yes = Decimal("0.5")
        return [_price(yes), _price(1 - yes)]

    def history(
        self, m: MarketPlan, token: str, start: datetime, end: datetime, at: datetime
    ) -> list[dict]:
        """CLOB `/prices-history` points ({"t": unix seconds, "p": price}) hourly within
        [start, end], never later than `at` or the close: the future is not on the wire."""
        side = "Yes" if token == token_id(m.key, "Yes") else "No"
        stop = min(end, at, m.close_at)
        t = max(start, m.open_at)
        t = m.open_at + HOUR * -(-(t - m.open_at) // HOUR)  # the first hour mark at or after t
        points = []
        while t <= stop:
            yes = m.price_at(t)
            if yes is not None:
                p = yes if side == "Yes" else 1 - yes
                points.append({"t": int(t.timestamp()), "p": float(p)})
            t += HOUR
        return points

    def token_owner(self, token: str) -> MarketPlan | None:
        """The market a CLOB token id belongs to."""
        return next(
            (
                m
                for m in self.plan.markets
                if token in (token_id(m.key, "Yes"), token_id(m.key, "No"))
            ),
            None,
        )


def volume_at(m: MarketPlan, at: datetime) -> float:
    """Volume traded so far: the plan's total, accrued evenly over the market's life, so the
    top-by-volume list changes as markets age, open and close."""
    life = (m.close_at - m.open_at).total_seconds() or 1.0
    done = min(max((at - m.open_at).total_seconds() / life, 0.0), 1.0)
    return round(m.volume * done, 2)


def token_id(key: str, outcome: str) -> str:
    """A decimal string of about 77 digits, like a real CLOB token id (a uint256)."""
    return str(int.from_bytes(hashlib.sha256(f"{key}:{outcome}".encode()).digest(), "big"))


def _hex(kind: str, key: str) -> str:
    return "0x" + hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _price(p: Decimal) -> str:
    return format(p.normalize(), "f")


def _event(m: MarketPlan, closed: bool) -> dict:
    key = m.group or m.key
    return {
        "id": key,
        "slug": key,
        "title": m.group_title or m.question,
        "active": True,
        "closed": closed,
    }
