"""A staff correction and a settlement of the same entries at once, on PostgreSQL.

Both run the one resolution service (markets.resolution.record_resolution) and its follow-up
(cohorts.settlement.after_resolution), which seals, settles, snapshots, folds the chart series
and appends to the scope's event log. The two must take those locks in one order: neither may
be refused with "deadlock detected", whatever the interleaving.

The interleaving that found the bug is forced rather than hoped for: the test's own connection
holds one entry's series head, so the correction stops right after the locks it takes first;
the settlement is started only then, and the head is let go once the settlement waits too.
"""

import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction

from cohorts.doctor import check_invariants
from cohorts.models import LedgerEntry, SeriesHead
from cohorts.seals.models import EventLogEntry, WeekSeal
from cohorts.seals.verify import verify_database
from cohorts.services import BetOrder, execute_orders
from cohorts.snapshots import take_snapshot
from cohorts.universe import freeze_universe
from markets.models import Market
from markets.resolution import record_resolution
from markets.services import set_resolution
from tests.cohorts.test_concurrency_pg import at_once
from tests.factories import make_cohort_with_entries, make_market

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
WEEK = datetime(2026, 11, 15, tzinfo=UTC)
D = Decimal


def _world(n_entries: int = 3, week_start: datetime = WEEK, *, shared: bool = True):
    """Entries that hold market A (resolved Yes and settled, its week sealed) and market B
    (open; a second, unsealed week holds it, so settling B seals that week first). `shared`:
    every entry holds both; else the first entry holds A and the others B (one scope still)."""
    cohort, entries = make_cohort_with_entries(n_entries, week_start=week_start)
    at = week_start + timedelta(hours=1)
    a, b = (make_market(source=Market.Source.POLYMARKET) for _ in range(2))
    for i, entry in enumerate(entries):
        bets = [BetOrder(a.pk, "Yes", D("500")), BetOrder(b.pk, "Yes", D("400"))]
        if not shared:
            bets = bets[:1] if i == 0 else bets[1:]
        execute_orders(entry, bets, [], None, at=at)
    take_snapshot(at, cohorts=[cohort])  # every entry has a chart series (and its head)
    freeze_universe(cohort, 1, at, markets=[a, b])
    record_resolution(a, status="resolved", outcome="Yes", by="upstream", reason="upstream")
    freeze_universe(cohort, 2, at + timedelta(days=7), markets=[b])
    assert list(WeekSeal.objects.filter(cohort=cohort).values_list("week", flat=True)) == [1]
    return cohort, entries, a, b


def _correct(a):
    return lambda: set_resolution(a, status="resolved", outcome="No", reason="source misread")


def _settle(b):
    return lambda: record_resolution(
        b, status="resolved", outcome="Yes", by="upstream", reason="up"
    )


def _waiting_on_locks() -> int:
    """Other backends of this database waiting for a lock (ours is not waiting)."""
    with connection.cursor() as cur:
        # Inside a transaction the activity view is read once and kept: read it afresh.
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cur.fetchone()[0]


def _until(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the other transactions never reached their locks"


def _start(fn, results: list, i: int) -> threading.Thread:
    def run():
        try:
            results[i] = (fn(), None)
        except Exception as exc:  # the test decides what is acceptable
            results[i] = (None, exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _assert_both_applied(results, a, b, reversals: int):
    assert [exc for _, exc in results] == [None, None]
    assert Market.objects.get(pk=a.pk).resolved_outcome == "No"
    assert Market.objects.get(pk=b.pk).status == "resolved"
    assert LedgerEntry.objects.filter(kind="reversal").count() == reversals
    assert sorted(WeekSeal.objects.values_list("week", flat=True)) == [1, 2]
    seqs = list(EventLogEntry.objects.filter(scope="live").values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, len(seqs) + 1))
    assert check_invariants() == []
    assert verify_database().ok


def test_correction_held_after_its_first_locks_and_a_settlement_both_apply():
    """The interleaving of the rehearsal's refusal: the correction (whose week is sealed) holds
    the entries and goes on to their snapshots while the settlement of B starts. Were the
    settlement to seal B's week (appending to the scope's event log) before it takes the
    entries, the correction's own append would wait on it while it waits on the correction's
    entries: a cycle PostgreSQL breaks by refusing one of them."""
    _, entries, a, b = _world()
    results: list = [None, None]
    with transaction.atomic():
        # The gate: the correction stops at this head, after everything it locks before it.
        SeriesHead.objects.select_for_update().get(entry=entries[0])
        correction = _start(_correct(a), results, 0)
        _until(lambda: _waiting_on_locks() == 1)
        settlement = _start(_settle(b), results, 1)
        _until(lambda: _waiting_on_locks() == 2)
    for thread in (correction, settlement):
        thread.join(timeout=60)
    _assert_both_applied(results, a, b, reversals=len(entries))


def test_settlement_held_after_its_first_locks_and_a_correction_of_other_entries_both_apply():
    """Other entries of one scope: the settlement of B (which seals B's week) is held first,
    then the correction runs. Each path takes the scope's series head and its event log; if
    one sealed (appending to the log) before it took the series head while the other took the
    series head before appending, the two would wait on each other."""
    _, entries, a, b = _world(shared=False)
    results: list = [None, None]
    with transaction.atomic():
        SeriesHead.objects.select_for_update().get(entry=entries[1])  # B's first holder
        settlement = _start(_settle(b), results, 1)
        _until(lambda: _waiting_on_locks() == 1)
        correction = _start(_correct(a), results, 0)
        _until(lambda: not correction.is_alive() or _waiting_on_locks() == 2)
    for thread in (correction, settlement):
        thread.join(timeout=60)
    _assert_both_applied(results, a, b, reversals=1)


def test_correction_and_settlement_started_together_both_apply():
    """The same two at once, left to the scheduler (a few rounds, new markets each time)."""
    for i in range(3):
        _, entries, a, b = _world(2, week_start=WEEK - timedelta(weeks=i))
        results = at_once(_correct(a), _settle(b))
        assert [exc for _, exc in results] == [None, None]
        assert Market.objects.get(pk=a.pk).resolved_outcome == "No"
    assert check_invariants() == []
