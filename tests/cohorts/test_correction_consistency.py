"""A staff correction leaves every figure consistent the moment it commits: the entry's latest
snapshot (its value), cash, invested amount and open count agree, on a live cohort and on a
replay/demo cohort whose simulated clock is ahead of the wall clock; `arena snapshot` then
explains what it marked instead of reporting an empty arena."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from cohorts.doctor import check_invariants
from cohorts.models import Cohort, Position, Snapshot
from cohorts.services import BetOrder, execute_orders
from cohorts.settlement import settle_market
from cohorts.snapshots import take_snapshot
from markets.models import Market
from markets.services import set_resolution
from tests.factories import make_cohort_with_entries, make_market
from web import chart_reads, selectors

D = Decimal
pytestmark = pytest.mark.django_db
WEEK = datetime(2026, 11, 15, tzinfo=UTC)


def _figures(entry):
    (row,) = [e for e in selectors.entry_rows(entry.cohort) if e.pk == entry.pk]
    latest = Snapshot.objects.filter(entry=entry).order_by("-ts").first()
    return row, latest


def _world(kind: str):
    cohort, (entry,) = make_cohort_with_entries(1, week_start=WEEK, kind=kind)
    won, other = make_market(prices={"Yes": "0.50"}), make_market(prices={"Yes": "0.40"})
    at = WEEK + timedelta(hours=1)
    execute_orders(entry, [BetOrder(won.pk, "Yes", D("500"))], [], None, at=at)
    execute_orders(entry, [BetOrder(other.pk, "Yes", D("400"))], [], None, at=at)
    return cohort, entry, won, at


@pytest.mark.parametrize("kind", [Cohort.Kind.LIVE, Cohort.Kind.REPLAY])
def test_reopen_leaves_value_cash_invested_and_open_count_consistent(kind):
    cohort, entry, won, at = _world(kind)
    Market.objects.filter(pk=won.pk).update(status=Market.Status.RESOLVED, resolved_outcome="Yes")
    settle_market(won, at=at + timedelta(days=1))
    # The cohort's own clock runs on past the settlement (for the replay: far past today).
    future = datetime(2027, 3, 1, tzinfo=UTC) if kind != Cohort.Kind.LIVE else None
    take_snapshot(at=future or at + timedelta(days=2), cohorts=[cohort])
    row, latest = _figures(entry)
    assert (row.n_open, row.invested, row.cash) == (1, D("400.00"), D("10100.00"))

    set_resolution(won, status=Market.Status.OPEN, reason="resolution source disputed")

    row, latest = _figures(entry)
    assert (row.n_open, row.invested, row.cash) == (2, D("900.00"), D("9100.00"))
    # The value now counts the reopened position instead of its reversed payout...
    assert row.value == latest.total == row.cash + latest.positions_value
    assert latest.positions_value == D("1000") * D("0.50") + D("1000") * D("0.40")
    # ...on the cohort's own clock: a replay ahead of the wall clock keeps its latest time.
    if future:
        assert latest.ts == future
    assert check_invariants() == []


def test_snapshot_cli_explains_cohorts_on_their_own_clock():
    cohort, entry, won, at = _world(Cohort.Kind.DEMO)
    out = StringIO()
    call_command("arena", "snapshot", stdout=out)
    text = out.getvalue()
    assert "0 live entries marked" in text
    assert "1 replay/demo cohorts run on their own simulated clock" in text
    assert Position.objects.filter(entry=entry, status="open").count() == 2


def test_a_correction_on_a_simulated_clock_lands_on_that_clock():
    """A demo cohort whose clock stopped before the correction: the corrected value goes on
    its latest snapshot (no lone row at the wall-clock time for charts to spike on) and the
    chart's correction line goes there too."""
    from web import charts

    cohort, entry, won, at = _world(Cohort.Kind.DEMO)
    sibling = make_cohort_with_entries(1, week_start=WEEK - timedelta(weeks=1), kind="demo")[1][0]
    Market.objects.filter(pk=won.pk).update(status=Market.Status.RESOLVED, resolved_outcome="Yes")
    settle_market(won, at=at + timedelta(days=1))
    clock = at + timedelta(days=2)
    take_snapshot(at=clock, cohorts=[cohort, sibling.cohort])

    set_resolution(won, status=Market.Status.OPEN, reason="disputed")

    row, latest = _figures(entry)
    assert latest.ts == clock and row.value == latest.total == row.cash + latest.positions_value
    assert Snapshot.objects.filter(ts__gt=clock).count() == 0
    payload = chart_reads.annotate_cohort(chart_reads.cohort_payload(cohort), cohort)
    staff = [a for a in payload["annotations"] if a["kind"] == "correction"]
    assert [a["x"] for a in staff] == [charts.fmt_ts(clock)]
