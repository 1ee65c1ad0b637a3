"""Snapshots: marking rules, bucketing and idempotency, constant query count, the verbs."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cohorts.doctor import check_invariants
from cohorts.models import Entry, LedgerEntry, Snapshot
from cohorts.services import BetOrder, SellOrder, execute_orders
from cohorts.snapshots import SNAPSHOT_FIELDS, bucket_for, take_snapshot
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_market

D = Decimal
pytestmark = pytest.mark.django_db
WEEK = datetime(2026, 11, 15, tzinfo=UTC)
T0 = datetime(2026, 11, 16, 10, 7, 30, tzinfo=UTC)


def bet(entry, market, outcome, amount):
    execute_orders(entry, [BetOrder(market.pk, outcome, D(amount))], [], None, at=T0)


def test_bucket_for():
    assert bucket_for(datetime(2026, 1, 1, 10, 59, 59, 999, tzinfo=UTC)) == datetime(
        2026, 1, 1, 10, 50, tzinfo=UTC
    )
    assert bucket_for(datetime(2026, 1, 1, 10, 0, tzinfo=UTC)) == datetime(
        2026, 1, 1, 10, 0, tzinfo=UTC
    )


def test_marks_open_positions_and_splits_pnl():
    _, (a, b) = make_cohort_with_entries(2, week_start=WEEK)
    m = make_market(prices={"Yes": "0.50", "No": "0.50"})
    bet(a, m, "Yes", "100")  # 200 sh
    bet(a, m, "No", "50")  # 100 sh
    pos = a.positions.get(outcome="Yes")
    Market.objects.filter(pk=m.pk).update(last_prices={"Yes": "0.80"})
    execute_orders(a, [], [SellOrder(pos.pk, D("50"))], None, at=T0)  # 100 sh @0.8: +30 realised
    Market.objects.filter(pk=m.pk).update(last_prices={"Yes": "0.70"})  # No = 0.30 by 1 - Yes

    assert take_snapshot(T0) == 2
    s = Snapshot.objects.get(entry=a)
    assert s.ts == datetime(2026, 11, 16, 10, 0, tzinfo=UTC)
    assert s.cash == D("10000") - 150 + 80
    assert s.positions_value == D("70.00") + D("30.00")
    assert s.total == s.cash + s.positions_value
    assert s.realized_pnl == D("30.00")
    assert s.unrealized_pnl == D("100.00") - (D("50") + D("50"))
    assert s.total == a.initial_balance + s.realized_pnl + s.unrealized_pnl
    untouched = Snapshot.objects.get(entry=b)
    assert (untouched.total, untouched.positions_value) == (D("10000.00"), 0)


def test_rerun_in_the_same_bucket_updates_the_row():
    _, (a,) = make_cohort_with_entries(1, week_start=WEEK)
    m = make_market()
    bet(a, m, "Yes", "60")  # 100 sh
    take_snapshot(T0)
    Market.objects.filter(pk=m.pk).update(last_prices={"Yes": "0.90"})
    take_snapshot(T0 + timedelta(minutes=2))
    (s,) = Snapshot.objects.filter(entry=a)
    assert s.positions_value == D("90.00")
    take_snapshot(T0 + timedelta(minutes=3))  # next bucket starts at 10:10
    assert Snapshot.objects.filter(entry=a).count() == 2


def test_closed_market_keeps_last_price_resolved_marks_at_outcome_void_at_cost():
    _, (a,) = make_cohort_with_entries(1, week_start=WEEK)
    closed, resolved, void, unpriced = (make_market(prices={"Yes": "0.25"}) for _ in range(4))
    for m in (closed, resolved, void, unpriced):
        bet(a, m, "Yes", "50")  # 200 sh each
    Market.objects.filter(pk=closed.pk).update(status="closed")
    Market.objects.filter(pk=resolved.pk).update(status="resolved", resolved_outcome="Yes")
    Market.objects.filter(pk=void.pk).update(status="void")
    Market.objects.filter(pk=unpriced.pk).update(last_prices={})
    take_snapshot(T0)
    s = Snapshot.objects.get(entry=a)
    # closed: 200 * 0.25; resolved (not yet settled) Yes: 200 * 1; void: cost 50; unpriced: cost 50.
    assert s.positions_value == D("50") + D("200") + D("50") + D("50")


def test_default_covers_running_live_cohorts_only():
    live, (le,) = make_cohort_with_entries(1, week_start=WEEK)
    demo, (de,) = make_cohort_with_entries(1, week_start=WEEK, kind="demo")
    done, (ce,) = make_cohort_with_entries(1)
    done.status = "completed"
    done.save()
    future, _ = make_cohort_with_entries(1, week_start=WEEK + timedelta(weeks=1))
    assert take_snapshot(T0) == 1
    assert list(Snapshot.objects.values_list("entry_id", flat=True)) == [le.pk]
    assert take_snapshot(T0, cohorts=[demo]) == 1
    assert Snapshot.objects.filter(entry=de).exists()


def _populate(n_entries, week_start):
    _, entries = make_cohort_with_entries(n_entries, week_start=week_start)
    markets = [make_market(prices={"Yes": "0.5"}) for _ in range(3)]
    for e in entries:
        for m in markets:
            bet(e, m, "Yes", "50")


def _snapshot_queries():
    with CaptureQueriesContext(connection) as ctx:
        take_snapshot(T0)
    return len(ctx.captured_queries)


def test_query_count_does_not_grow_with_entries():
    _populate(2, WEEK)
    small = _snapshot_queries()
    Snapshot.objects.all().delete()
    _populate(20, WEEK - timedelta(weeks=1))  # now 22 entries in two cohorts
    big = _snapshot_queries()
    # 4 reads to compute, 1 upsert, 10 to keep the chart series (cohorts/series/write.py), and the
    # savepoint around them: the same for 2 entries as for 22.
    assert small == big <= 17
    assert Snapshot.objects.count() == 22


def test_snapshot_and_doctor_verbs():
    _, (a,) = make_cohort_with_entries(
        1, week_start=datetime(2026, 11, 22, tzinfo=UTC) - timedelta(weeks=1)
    )
    out = StringIO()
    call_command("arena", "snapshot", stdout=out)
    assert "1 live entry marked" in out.getvalue()
    assert Snapshot.objects.filter(entry=a).count() == 1

    out = StringIO()
    call_command("arena", "doctor", stdout=out)
    assert "ok:" in out.getvalue()
    # Corrupt the books behind the services' back: doctor must notice and fail.
    Entry.objects.filter(pk=a.pk).update(cash=D("10000.01"))
    Snapshot.objects.filter(entry=a).update(total=D("1"))
    out = StringIO()
    with pytest.raises(CommandError, match="2 invariant violation"):
        call_command("arena", "doctor", stdout=out)
    assert f"entry {a.pk}: cash 10000.01 != ledger sum 10000.00" in out.getvalue()
    assert "snapshot total equals cash + positions" in out.getvalue()


def test_doctor_detects_each_broken_invariant():
    _, (a,) = make_cohort_with_entries(1, week_start=WEEK)
    m = make_market()
    bet(a, m, "Yes", "60")
    assert check_invariants() == []
    Market.objects.filter(pk=m.pk).update(settled_at=T0, status="resolved", resolved_outcome="Yes")
    problems = check_invariants()
    assert any("marked settled but has 1 open positions" in p for p in problems)
    Market.objects.filter(pk=m.pk).update(settled_at=None)
    a.positions.update(status="settled")
    assert any("settled without a live settlement" in p for p in check_invariants())
    a.positions.update(status="open", shares=0)
    assert any("shares 0.000000" in p for p in check_invariants())
    LedgerEntry.objects.filter(entry=a, kind="buy").delete()
    assert any("!= ledger sum" in p for p in check_invariants())


def test_a_requoted_book_values_as_a_fresh_read():
    """The demo reads a tick's book once per stretch without events and hands it each quote it
    writes: the rows must be those compute_snapshots reads afresh."""
    from cohorts.snapshots import compute_snapshots, read_book, snapshot_cohorts, value_book

    cohort, (a, b) = make_cohort_with_entries(2, week_start=WEEK)
    m = make_market(prices={"Yes": "0.50", "No": "0.50"})
    n = make_market(prices={"Yes": "0.20", "No": "0.80"})
    bet(a, m, "Yes", "100")
    bet(b, n, "No", "60")
    which = snapshot_cohorts(T0, [cohort])
    book = read_book(which)
    quotes = {m.pk: {"Yes": "0.73", "No": "0.27"}}
    Market.objects.filter(pk=m.pk).update(last_prices=quotes[m.pk])
    book.requote(quotes)

    def fields(rows):
        return sorted((s.entry_id, s.ts, *(getattr(s, f) for f in SNAPSHOT_FIELDS)) for s in rows)

    fresh = fields(compute_snapshots(which, bucket_for(T0)))
    assert fields(value_book(book, bucket_for(T0))) == fresh
    assert dict((e, total) for e, _ts, _cash, _pv, total, *_ in fresh)[a.pk] == D("10046.00")
