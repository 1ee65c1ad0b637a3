"""A market chart's quotes thinned in the database: which rows it keeps, and the shape of the
query that keeps them (one window numbered in the unique index's order, nothing sorted
before the filter), since a busy market's page reads its whole history on every cold render."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from markets.models import PricePoint
from tests.site.conftest import T0
from web import charts
from web.chart_reads import market_price_points

pytestmark = pytest.mark.django_db


def quotes(market, outcome: str, n: int, every: timedelta) -> list[PricePoint]:
    return PricePoint.objects.bulk_create(
        PricePoint(market=market, outcome=outcome, ts=T0 + i * every, price=Decimal("0.5"))
        for i in range(n)
    )


def test_every_kth_quote_per_outcome_and_each_outcomes_latest_in_two_queries(world):
    market = world.market()
    PricePoint.objects.filter(market=market).delete()
    # Outcomes of unequal histories: the stride comes from the longer one, and the shorter
    # one still ends on its own latest quote, which the stride would skip.
    yes = quotes(market, "Yes", 95, timedelta(minutes=15))
    no = quotes(market, "No", 52, timedelta(minutes=30))
    with CaptureQueriesContext(connection) as queries:
        points = market_price_points(market, max_points=10)
    assert len(queries) == 2  # the counts per outcome, then the thinned rows
    stride = 12  # ceil(95 / (10 - 2)): room for the latest quote and a range's opening price
    want = {("Yes", p.ts) for p in yes[::stride] + [yes[-1]]}
    want |= {("No", p.ts) for p in no[::stride] + [no[-1]]}
    assert [(p.outcome, p.ts) for p in points] == sorted(want, key=lambda w: (w[1], w[0] != "Yes"))
    assert [p.ts for p in points] == sorted(p.ts for p in points)  # oldest first
    assert max(sum(p.outcome == o for p in points) for o in ("Yes", "No")) <= 10 - 1

    window = queries[-1]["sql"].upper()
    assert window.count("ROW_NUMBER()") >= 1
    # No second window counting each partition, and no ORDER BY outside the window clauses:
    # either would make the database buffer or sort every quote of the market.
    outside = re.sub(r"OVER \([^)]*\)", "", window)
    assert "COUNT(" not in outside and "ORDER BY" not in outside, window


def test_a_short_history_is_read_whole_in_time_order(world):
    market = world.market()
    PricePoint.objects.filter(market=market).delete()
    quotes(market, "Yes", 5, timedelta(hours=1))
    quotes(market, "No", 5, timedelta(hours=1))
    points = market_price_points(market, since=T0 + timedelta(hours=2), max_points=10)
    # Oldest first; at one time, in the order the quotes were stored.
    assert [(p.ts - T0, p.outcome) for p in points] == [
        (timedelta(hours=h), o) for h in (2, 3, 4) for o in ("Yes", "No")
    ]


def test_a_line_thinned_in_the_database_is_not_halved_again_by_the_chart(client, world):
    market = world.market()
    PricePoint.objects.filter(market=market).delete()
    # 800 quotes an outcome: every 2nd kept, plus the latest (not on the stride), made 401,
    # one over the chart's own limit, and the chart kept every 2nd of those: 201 points.
    quotes(market, "Yes", 800, timedelta(hours=1))
    quotes(market, "No", 800, timedelta(hours=1))
    data = client.get(f"/api/markets/{market.pk}/prices?range=ALL").json()
    for line in data["lines"]:
        assert charts.MAX_POINTS // 2 + 50 < len(line["x"]) <= charts.MAX_POINTS + 1
        assert line["x"][-1] == (T0 + timedelta(hours=799)).strftime("%Y-%m-%d %H:%M")
