"""The one rule of what a score run at as_of knows of a market's resolution (scoring.load.known_at):
recorded by the arena by as_of, whatever upstream's own resolution time; without the recording
time, the resolution time stands in. The score loader reads markets through it."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from markets.models import Market
from scoring.load import known_at, load_scope, status_at
from tests.factories import make_cohort_with_entries, make_market
from tests.scoring.conftest import WEEK_START, add_forecasts, make_decision

UPSTREAM = WEEK_START + timedelta(days=2)  # when Polymarket says it resolved
AS_OF = WEEK_START + timedelta(days=3)
RECORDED = WEEK_START + timedelta(days=4)  # when the arena recorded it (a late sync, a fix)


def test_a_resolution_recorded_after_as_of_is_unknown_though_upstream_resolved_before():
    assert not known_at(RECORDED, UPSTREAM, AS_OF)
    assert status_at(Market.Status.RESOLVED, "Yes", known_at(RECORDED, UPSTREAM, AS_OF)) == (
        Market.Status.CLOSED
    )
    assert status_at(Market.Status.VOID, "", known_at(RECORDED, UPSTREAM, AS_OF)) == (
        Market.Status.CLOSED
    )


def test_a_resolution_recorded_by_as_of_is_known():
    assert known_at(AS_OF, UPSTREAM, AS_OF)  # at as_of itself: known
    assert known_at(UPSTREAM, UPSTREAM, AS_OF)
    assert status_at(Market.Status.RESOLVED, "Yes", True) == Market.Status.RESOLVED
    assert status_at(Market.Status.VOID, "", True) == Market.Status.VOID


def test_the_recording_time_decides_even_when_upstream_dates_it_after_as_of():
    """Upstream dating after as_of but recorded before (a provisional upstream date corrected
    later): the run read it, so it counts."""
    assert known_at(UPSTREAM, AS_OF + timedelta(hours=1), AS_OF)


def test_without_a_recording_time_the_resolution_time_stands_in():
    assert known_at(None, UPSTREAM, AS_OF)
    assert not known_at(None, RECORDED, AS_OF)
    assert known_at(None, None, AS_OF)  # a final market with neither time: taken as known
    # No outcome: never resolved, whatever the times.
    assert status_at(Market.Status.RESOLVED, "", True) == Market.Status.CLOSED
    assert status_at(Market.Status.OPEN, "", False) == Market.Status.OPEN


@pytest.mark.django_db
def test_the_score_loader_reads_markets_through_the_rule():
    cohort, (entry,) = make_cohort_with_entries(1, week_start=WEEK_START, at=WEEK_START)
    resolved = dict(status=Market.Status.RESOLVED, resolved_outcome="Yes", resolved_at=UPSTREAM)
    late = make_market(**resolved, resolution_recorded_at=RECORDED, closed_time=None)
    early = make_market(**resolved, resolution_recorded_at=UPSTREAM + timedelta(hours=1))
    unstamped = make_market(**resolved)
    decision = make_decision(entry, at=WEEK_START + timedelta(hours=1))
    add_forecasts(decision, [(m, "Yes", 0.7, 0.6) for m in (late, early, unstamped)])

    markets = load_scope(cohort.kind, AS_OF).markets
    assert markets[late.pk].status == Market.Status.CLOSED
    # Its resolution time is unknown as well: a run that read before the recording saw none.
    assert math.isnan(markets[late.pk].resolved_t) and math.isnan(markets[late.pk].closed_t)
    assert markets[early.pk].status == Market.Status.RESOLVED
    assert markets[early.pk].resolved_t == UPSTREAM.timestamp()  # upstream's time, once known
    assert markets[unstamped.pk].status == Market.Status.RESOLVED

    later = load_scope(cohort.kind, RECORDED).markets
    assert later[late.pk].status == Market.Status.RESOLVED
    assert later[late.pk].resolved_t == UPSTREAM.timestamp()
