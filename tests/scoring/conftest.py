"""Small builders for the scoring tests: decisions, forecasts, price points and trades via the ORM.

Cohorts, markets and competitors come from tests/factories.py (the real open_cohort service).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from cohorts.models import Decision, Forecast, Position, Trade
from markets.models import PricePoint

WEEK_START = datetime(2026, 11, 1, tzinfo=UTC)  # a Sunday


def make_decision(entry, week: int = 1, at: datetime | None = None, cash_before="10000.00", **kw):
    at = at or WEEK_START + timedelta(days=7 * (week - 1), hours=1)
    return Decision.objects.create(
        entry=entry,
        week=week,
        status=Decision.Status.DONE,
        claimed_at=at,
        decided_at=at,
        finished_at=at,
        cash_before=Decimal(cash_before) if cash_before is not None else None,
        **kw,
    )


def add_forecasts(decision, rows) -> list[Forecast]:
    """rows: (market, outcome, probability, market_price or None)."""
    return Forecast.objects.bulk_create(
        Forecast(
            decision=decision,
            entry_id=decision.entry_id,
            market=market,
            outcome=outcome,
            probability=p,
            market_price=m,
            created_at=decision.decided_at,
        )
        for market, outcome, p, m in rows
    )


def add_price(market, outcome: str, ts: datetime, price) -> PricePoint:
    return PricePoint.objects.create(
        market=market, outcome=outcome, ts=ts, price=Decimal(str(price))
    )


def add_buy(entry, decision, market, outcome, amount, price, at) -> Trade:
    """A BUY trade with its position, written directly (for scenarios that need hundreds)."""
    amount, price = Decimal(str(amount)), Decimal(str(price))
    shares = (amount / price).quantize(Decimal("0.000001"))
    position = Position.objects.create(
        entry=entry, market=market, outcome=outcome, shares=shares, cost_basis=amount, opened_at=at
    )
    return Trade.objects.create(
        entry=entry,
        decision=decision,
        position=position,
        side=Trade.Side.BUY,
        amount=amount,
        shares=shares,
        price=price,
        executed_at=at,
    )


@pytest.fixture
def week_start():
    return WEEK_START
