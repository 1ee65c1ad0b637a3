"""The beat jobs run twice at once on PostgreSQL: no duplicate cohort, snapshot or payout.

Each thread has its own database connection (Django opens one per thread), so the two runs
really race inside the database; a barrier lines their starts up.
"""

import threading
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import partial

import pytest
from django.db import connection

from cohorts.doctor import check_invariants
from cohorts.models import Cohort, Entry, LedgerEntry, Settlement, Snapshot
from cohorts.services import BetOrder, ExecutionError, execute_orders, open_cohort
from cohorts.settlement import settle_market, settle_pending
from cohorts.snapshots import take_snapshot
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_competitor, make_market

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
T0 = datetime(2026, 11, 16, 10, tzinfo=UTC)


def at_once(*fns):
    """Run each fn in its own thread, started together; return [(result, exception), ...]."""
    barrier = threading.Barrier(len(fns))
    results = [None] * len(fns)

    def run(i):
        try:
            barrier.wait(timeout=10)
            results[i] = (fns[i](), None)
        except Exception as exc:  # reported to the test, which decides what is acceptable
            results[i] = (None, exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def twice_at_once(fn):
    return at_once(fn, fn)


def test_open_cohort_twice_at_once():
    for _ in range(3):
        make_competitor()
    results = twice_at_once(lambda: open_cohort(date(2026, 11, 15)))
    assert [exc for _, exc in results] == [None, None]
    assert sorted(created for (_, created), _ in results) == [False, True]
    assert len({cohort.pk for (cohort, _), _ in results}) == 1
    assert Cohort.objects.count() == 1
    assert Entry.objects.count() == 3 and LedgerEntry.objects.filter(kind="deposit").count() == 3


def test_snapshot_twice_at_once():
    _, entries = make_cohort_with_entries(5, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    m = make_market()
    for e in entries:
        execute_orders(e, [BetOrder(m.pk, "Yes", Decimal("60"))], [], None, at=T0)
    results = twice_at_once(lambda: take_snapshot(T0))
    assert results == [(5, None), (5, None)]
    assert Snapshot.objects.count() == 5
    assert check_invariants() == []


def test_settle_twice_at_once_pays_once():
    _, entries = make_cohort_with_entries(4, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    m = make_market()
    for e in entries:
        execute_orders(e, [BetOrder(m.pk, "Yes", Decimal("60"))], [], None, at=T0)
    Market.objects.filter(pk=m.pk).update(status="resolved", resolved_outcome="Yes")
    results = twice_at_once(lambda: settle_market(m, at=T0).settled)
    assert sorted(r for r, _ in results) == [0, 4]
    assert Settlement.objects.count() == 4
    assert LedgerEntry.objects.filter(kind="payout").count() == 4
    assert all(e.cash == Decimal("10040.00") for e in Entry.objects.all())

    # A resolution change reversed by two periodic runs at once is also applied once.
    Market.objects.filter(pk=m.pk).update(resolved_outcome="No")
    results = twice_at_once(lambda: settle_pending(T0)["reversed"])
    assert sorted(r for r, _ in results) == [0, 4]
    assert LedgerEntry.objects.filter(kind="reversal").count() == 4
    assert all(e.cash == Decimal("9940.00") for e in Entry.objects.all())
    assert check_invariants() == []


def test_two_decisions_at_once_cannot_overspend():
    _, (entry,) = make_cohort_with_entries(1, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    m = make_market()
    # Each is exactly 25% of the starting cash: valid alone, but not after the other.
    results = twice_at_once(
        lambda: execute_orders(entry, [BetOrder(m.pk, "Yes", Decimal("2500"))], [], None, at=T0)
    )
    errors = [exc for _, exc in results if exc is not None]
    assert len(errors) == 1 and isinstance(errors[0], ExecutionError)
    assert "above 25% of cash ($1875.00 of $7500.00)" in str(errors[0])
    assert Entry.objects.get(pk=entry.pk).cash == Decimal("7500.00")
    assert check_invariants() == []


def test_decision_and_settlement_of_the_same_entry_at_once():
    """Execution locks the entry then its positions; settlement must not take them the other
    way round, or the two deadlock. Both must succeed, whatever the interleaving."""
    _, (entry,) = make_cohort_with_entries(1, week_start=datetime(2026, 11, 15, tzinfo=UTC))
    for _ in range(5):
        held, fresh = make_market(), make_market()
        execute_orders(entry, [BetOrder(held.pk, "Yes", Decimal("60"))], [], None, at=T0)
        Market.objects.filter(pk=held.pk).update(status="resolved", resolved_outcome="Yes")
        results = at_once(
            partial(settle_market, held, at=T0),
            partial(
                execute_orders, entry, [BetOrder(fresh.pk, "No", Decimal("50"))], [], None, at=T0
            ),
        )
        assert [exc for _, exc in results] == [None, None]
    assert check_invariants() == []
