"""Opening cohorts, their weeks and lifecycle, and the open-cohort verb."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from cohorts.models import Cohort, Entry, LedgerEntry
from cohorts.services import (
    BetOrder,
    advance_cohorts,
    cohort_week,
    decision_eligible_cohorts,
    execute_orders,
    open_cohort,
    week_start_for,
)
from cohorts.settlement import settle_market
from core.methodology import METHODOLOGY_HASH, METHODOLOGY_VERSION
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_competitor, make_market

pytestmark = pytest.mark.django_db
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    "at, expected",
    [
        (datetime(2026, 11, 15, 0, 0, tzinfo=UTC), SUNDAY),
        (datetime(2026, 11, 21, 23, 59, 59, tzinfo=UTC), SUNDAY),
        (datetime(2026, 11, 18, 12, 0, tzinfo=UTC), SUNDAY),
        (datetime(2026, 11, 22, 0, 0, tzinfo=UTC), SUNDAY + timedelta(days=7)),
    ],
)
def test_week_start_for(at, expected):
    assert week_start_for(at) == expected


def test_open_cohort_creates_funded_entries_once():
    a = make_competitor(replicates=2)
    make_competitor()
    make_competitor(active=False)
    cohort, created = open_cohort(date(2026, 11, 15))
    assert created and cohort.week_start == SUNDAY and cohort.kind == "live"
    assert (cohort.methodology_version, cohort.methodology_hash) == (
        METHODOLOGY_VERSION,
        METHODOLOGY_HASH,
    )
    assert cohort.decision_weeks == 5
    entries = Entry.objects.filter(cohort=cohort)
    assert entries.count() == 3  # two replicates of a, one of b, none of the inactive one
    assert sorted(entries.filter(competitor=a).values_list("replicate", flat=True)) == [1, 2]
    for e in entries:
        assert e.cash == Decimal("10000.00")
        (deposit,) = LedgerEntry.objects.filter(entry=e)
        assert (deposit.kind, deposit.amount) == ("deposit", Decimal("10000.00"))

    again, created_again = open_cohort(SUNDAY)
    assert (again.pk, created_again) == (cohort.pk, False)
    assert Entry.objects.filter(cohort=cohort).count() == 3
    assert LedgerEntry.objects.count() == 3


def test_kinds_are_separate_cohorts_and_default_is_this_week():
    make_competitor()
    at = datetime(2026, 11, 18, 9, tzinfo=UTC)
    live, _ = open_cohort(at=at)
    demo, created = open_cohort(kind="demo", at=at)
    assert created and live.pk != demo.pk and live.week_start == demo.week_start == SUNDAY


def test_open_cohort_rejects_a_non_sunday():
    with pytest.raises(ValueError, match="Sunday"):
        open_cohort(date(2026, 11, 16))
    with pytest.raises(ValueError, match="Sunday"):
        open_cohort(datetime(2026, 11, 15, 1, tzinfo=UTC))


def test_open_cohort_verb():
    make_competitor()
    out = StringIO()
    call_command("arena", "open-cohort", "--week", "2026-11-15", stdout=out)
    assert "opened" in out.getvalue() and "1 entries" in out.getvalue()
    out = StringIO()
    call_command("arena", "open-cohort", "--week", "2026-11-15", stdout=out)
    assert "already open" in out.getvalue()
    with pytest.raises(CommandError, match="must be a Sunday; 2026-11-17 is a Tuesday"):
        call_command("arena", "open-cohort", "--week", "2026-11-17")
    with pytest.raises(CommandError, match="YYYY-MM-DD"):
        call_command("arena", "open-cohort", "--week", "next week")
    assert Cohort.objects.count() == 1


def test_cohort_week_and_decision_eligibility(settings):
    settings.ARENA_DECISION_WEEKS = 2
    cohort, _ = make_cohort_with_entries(1, week_start=SUNDAY)
    assert cohort.decision_weeks == 2
    assert cohort_week(cohort, SUNDAY) == 1
    assert cohort_week(cohort, SUNDAY + timedelta(days=6, hours=23)) == 1
    assert cohort_week(cohort, SUNDAY + timedelta(days=7)) == 2
    assert list(decision_eligible_cohorts(SUNDAY + timedelta(days=8))) == [cohort]
    assert list(decision_eligible_cohorts(SUNDAY + timedelta(days=14))) == []
    assert list(decision_eligible_cohorts(SUNDAY - timedelta(days=1))) == []
    assert list(decision_eligible_cohorts(SUNDAY, kind="demo")) == []


def test_lifecycle_active_tracking_completed(settings):
    settings.ARENA_DECISION_WEEKS = 1
    cohort, (entry,) = make_cohort_with_entries(1, week_start=SUNDAY)
    market = make_market()
    execute_orders(entry, [BetOrder(market.pk, "Yes", Decimal("60"))], [], None, at=SUNDAY)

    assert advance_cohorts(SUNDAY + timedelta(days=3)) == {"tracking": 0, "completed": 0}
    assert advance_cohorts(SUNDAY + timedelta(days=7)) == {"tracking": 1, "completed": 0}
    cohort.refresh_from_db()
    assert cohort.status == "tracking"  # an open position keeps it tracking
    assert list(decision_eligible_cohorts(SUNDAY + timedelta(days=7))) == []

    Market.objects.filter(pk=market.pk).update(status="resolved", resolved_outcome="No")
    settle_market(market, at=SUNDAY + timedelta(days=8))
    done_at = SUNDAY + timedelta(days=8, hours=1)
    assert advance_cohorts(done_at) == {"tracking": 0, "completed": 1}
    cohort.refresh_from_db()
    assert (cohort.status, cohort.completed_at) == ("completed", done_at)
    assert advance_cohorts(done_at) == {"tracking": 0, "completed": 0}


def test_advance_on_a_simulated_clock_touches_only_the_given_cohorts(settings):
    settings.ARENA_DECISION_WEEKS = 1
    live, _ = make_cohort_with_entries(1, week_start=SUNDAY)
    replay, _ = make_cohort_with_entries(1, week_start=SUNDAY - timedelta(weeks=3), kind="replay")
    # A replay walking its own clock far ahead must not move the live cohort.
    later = SUNDAY + timedelta(weeks=4)
    assert advance_cohorts(later, cohorts=[replay.pk]) == {"tracking": 1, "completed": 1}
    live.refresh_from_db()
    assert live.status == "active"
    # Without cohorts, only live cohorts advance: the replay one is not re-touched.
    assert advance_cohorts(later) == {"tracking": 1, "completed": 1}
    live.refresh_from_db()
    assert live.status == "completed"
