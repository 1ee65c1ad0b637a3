"""A staff correction in a demo (or replay) scope is timed on that scope's clock, so the
corrected market stays scored: before, its resolution was stamped with the wall clock, after
the scope's as_of, and scoring dropped the market (resolved counts fell, every Brier moved)
while the P/L kept it."""

import logging
from datetime import UTC, datetime, timedelta

import pytest

from cohorts.models import Cohort, Decision, Forecast
from cohorts.snapshots import take_snapshot
from core import clock
from markets.models import Market, ResolutionChange
from markets.resolution import record_resolution
from markets.services import set_resolution
from scoring.services import compute_scores
from tests.factories import make_cohort_with_entries, make_market

pytestmark = pytest.mark.django_db
WEEK = datetime(2026, 1, 4, tzinfo=UTC)  # a demo world whose clock stopped long before today


def _scores(run) -> tuple[int, float]:
    (row,) = [r for r in run.rows.all() if r.cohort_id is None]
    return row.n_resolved, row.brier


def test_a_correction_in_a_demo_scope_keeps_the_market_scored(caplog):
    cohort, (entry,) = make_cohort_with_entries(1, week_start=WEEK, kind=Cohort.Kind.DEMO)
    market = make_market(source=Market.Source.DEMO)
    decided = WEEK + timedelta(minutes=5)
    decision = Decision.objects.create(entry=entry, week=1, status="done", claimed_at=decided,
                                       decided_at=decided, action="HOLD")  # fmt: skip
    Forecast.objects.create(decision=decision, entry=entry, market=market, outcome="Yes",
                            probability=0.8, market_price=0.6, created_at=decided)  # fmt: skip
    resolved = WEEK + timedelta(days=3)
    # Recorded as the demo records it, on its own clock: a run counts a resolution from when
    # the arena recorded it (scoring.load.known_at).
    with clock.running_on(clock.SimulatedClock(resolved)):
        record_resolution(market.pk, status=Market.Status.RESOLVED, outcome="Yes",
                          by=Market.ResolvedBy.DEMO, reason="demo", at=resolved)  # fmt: skip
    scope_now = WEEK + timedelta(days=6)
    take_snapshot(at=scope_now, cohorts=[cohort])

    before = _scores(compute_scores("demo"))
    assert before[0] == 1 and before[1] == pytest.approx(0.04)

    caplog.set_level(logging.INFO, logger="markets.corrections")
    set_resolution(market, status=Market.Status.RESOLVED, outcome="No", reason="source reversed")

    market.refresh_from_db()
    change = ResolutionChange.objects.filter(market=market).latest("pk")
    assert market.resolved_at == change.changed_at == scope_now  # the scope's clock, not today
    after = _scores(compute_scores("demo"))
    assert after[0] == 1  # still resolved and scored...
    assert after[1] == pytest.approx(0.64)  # ...on its corrected outcome
    line = next(r.getMessage() for r in caplog.records if "staff changed" in r.getMessage())
    assert f"market={market.pk} from resolved Yes to resolved No reason=source reversed" in line


def test_a_live_correction_keeps_the_wall_clock():
    market = make_market()
    record_resolution(market.pk, status=Market.Status.RESOLVED, outcome="Yes",
                      by=Market.ResolvedBy.UPSTREAM, reason="upstream")  # fmt: skip
    start = clock.wall()
    set_resolution(market, status=Market.Status.VOID, reason="ambiguous")
    market.refresh_from_db()
    assert market.resolved_at >= start
