"""The demo's markets of more than two outcomes (issue 27 item 5): every multiclass path of the
arena (quotes, prompts, stated distributions, settlement, the multiclass Brier) runs on them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import numpy as np
import pytest

from cohorts.models import Forecast
from markets.models import Market, PricePoint
from scoring.models import LeaderboardRow, ScoreRun
from simulations.demo_plan import MULTI_MIN_MARKETS, build_plan
from tests import demo_snapshot

START = datetime(2026, 3, 1, tzinfo=UTC)
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


def test_plan_has_one_multi_outcome_market_per_week_priced_as_one_unit():
    plan = build_plan(seed=7, weeks=2, n_markets=40, start=START)
    multi = [m for m in plan.markets if m.paths is not None]
    assert len(plan.markets) == 40 and len(multi) == 2
    for m in multi:
        assert 3 <= len(m.outcomes) <= 6 and m.outcome in m.outcomes
        assert np.allclose(m.paths.sum(axis=0), 1, atol=0.02)  # rounding and clipping only
        assert START - m.open_at <= np.timedelta64(3, "D") and m.close_at < START.replace(day=15)
        quote = m.quote_at(m.open_at)
        assert list(quote) == list(m.outcomes)
        assert all(Decimal(p) > 0 for p in quote.values())
    # Small demos stay binary; the binary markets of a seed do not move.
    small = build_plan(seed=7, weeks=2, n_markets=MULTI_MIN_MARKETS - 1, start=START)
    assert all(m.paths is None for m in small.markets)


@pytest.fixture
def demo(db, settings):
    settings.ARENA_LLM_API_KEY = ""
    return demo_snapshot.demo(weeks=2, seed=7, n_markets=40, now=NOW, latency_scale=0)


def test_multi_outcome_markets_are_traded_resolved_and_scored(demo):
    multi = list(Market.objects.filter(source=Market.Source.DEMO, kind=Market.Kind.MULTI))
    assert len(multi) == 2
    for m in multi:
        assert len(m.outcomes) > 2 and set(m.last_prices) == set(m.outcomes)
        assert set(PricePoint.objects.filter(market=m).values_list("outcome", flat=True)) == set(
            m.outcomes
        )
        assert m.status == Market.Status.RESOLVED and m.resolved_outcome in m.outcomes
    # Competitors stated whole distributions on them ...
    stated = Forecast.objects.filter(market__in=multi).values("entry__competitor").distinct()
    assert stated.count() >= 1
    # ... so the multiclass Brier is computed and stored for those competitors.
    run = ScoreRun.objects.filter(scope="demo").latest("pk")
    rows = LeaderboardRow.objects.filter(run=run, cohort__isnull=True)
    with_multi = [r for r in rows if (r.stored_details.brier_multiclass or None) is not None]
    assert with_multi, "no competitor has a multiclass Brier"
    for row in with_multi:
        multiclass = row.stored_details.brier_multiclass
        assert multiclass.n >= 1 and multiclass.value is not None
        assert 0 <= multiclass.value <= 2  # the summed (0-2) convention
