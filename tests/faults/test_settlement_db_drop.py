"""Fault: the database connection drops (or the database refuses a write) in the middle of a
settlement.

The fault is injected in PostgreSQL itself, not in our code: a test-only trigger fires on the Nth
row of the kind we pick and either terminates its own backend (pg_terminate_backend: the
connection is gone, as when the database restarts or a proxy cuts it) or raises. Proves: the
market is never half-settled (all or none of its positions, cash == ledger), and a rerun
settles it exactly once. The last test does it on a real worker, where Celery's retry is the
rerun and the failed run stays visible to staff.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from celery import Celery
from django.db import DatabaseError
from django.db.models import Sum
from django.utils import timezone

from cohorts.doctor import check_invariants
from cohorts.models import Entry, LedgerEntry, Position, Settlement
from cohorts.services import BetOrder, execute_orders
from cohorts.settlement import settle_market
from core.models import JobRun
from markets.models import Market
from tests.factories import make_cohort_with_entries, make_market
from tests.faults.conftest import child_env, wait_until, worker_args

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

def _resolved_market_with_positions() -> tuple[Market, list[Entry]]:
    """Four entries on one market (three on the winning side), then it resolves Yes."""
    _, entries = make_cohort_with_entries(4)
    market = make_market(prices={"Yes": "0.60", "No": "0.40"})
    for entry, outcome in zip(entries, ["Yes", "Yes", "No", "Yes"], strict=True):
        execute_orders(entry, [BetOrder(market.pk, outcome, Decimal("100"))], [], None)
    Market.objects.filter(pk=market.pk).update(
        status=Market.Status.RESOLVED, resolved_outcome="Yes", resolved_at=timezone.now()
    )
    return Market.objects.get(pk=market.pk), entries


def _assert_books_consistent(entries: list[Entry]) -> None:
    for entry in entries:
        entry.refresh_from_db()
        ledger = LedgerEntry.objects.filter(entry=entry).aggregate(s=Sum("amount"))["s"]
        assert entry.cash == ledger
    assert check_invariants() == []


def _assert_settled_once(market: Market, entries: list[Entry]) -> None:
    statuses = set(Position.objects.filter(market=market).values_list("status", flat=True))
    assert statuses == {Position.Status.SETTLED}
    assert Settlement.objects.filter(market=market).count() == 4
    payouts = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.PAYOUT)
    assert sorted(payouts.values_list("entry_id", flat=True)) == sorted(
        e.pk for e, won in zip(entries, [1, 1, 0, 1], strict=True) if won
    )
    # 100 / 0.60 = 166.666666 shares: $166.67 to the nearest cent (each winner is a separate
    # entry, so no fraction carries over), once per winner.
    assert set(payouts.values_list("amount", flat=True)) == {Decimal("166.67")}
    market.refresh_from_db()
    assert market.settled_at is not None
    _assert_books_consistent(entries)


@pytest.mark.parametrize(
    ("point", "nth", "action"),
    [
        ("settlement rows", 3, "terminate"),
        ("payout ledger rows", 2, "terminate"),
        ("payout ledger rows", 3, "raise"),
        ("entry cash updates", 2, "terminate"),
    ],
)
def test_a_fault_mid_settlement_leaves_nothing_half_settled_and_a_rerun_settles_once(
    inject_fault, point, nth, action
):
    market, entries = _resolved_market_with_positions()
    inject_fault(point, nth, action)

    with pytest.raises(DatabaseError):
        settle_market(market)

    # None of it happened: no settlement, every position still open, no payout, books balanced.
    assert not Settlement.objects.exists()
    statuses = set(Position.objects.filter(market=market).values_list("status", flat=True))
    assert statuses == {Position.Status.OPEN}
    assert not LedgerEntry.objects.filter(kind=LedgerEntry.Kind.PAYOUT).exists()
    market.refresh_from_db()
    assert market.settled_at is None
    _assert_books_consistent(entries)

    # The fault was one-shot (the row counter has moved past it): a rerun settles everything...
    report = settle_market(market)
    assert report.settled == 4 and report.paid == Decimal("166.67") * 3
    _assert_settled_once(market, entries)
    # ...and another rerun finds nothing left to do.
    assert settle_market(market).settled == 0
    _assert_settled_once(market, entries)


@pytest.mark.redis
def test_a_worker_whose_connection_drops_mid_settlement_retries_and_settles_once(
    inject_fault, tmp_path, redis_server, procs
):
    market, entries = _resolved_market_with_positions()
    inject_fault("payout ledger rows", 2, "terminate")
    worker = procs("worker", worker_args("w"), child_env(tmp_path, redis_server.url))
    Celery(broker=redis_server.url, set_as_current=False).send_task("cohorts.tasks.settle", args=[market.pk])

    wait_until(
        lambda: JobRun.objects.filter(job="settle", status=JobRun.Status.OK).exists(),
        45, "the retried settle task", procs=(worker,),
    )  # fmt: skip
    _assert_settled_once(market, entries)
    runs = list(JobRun.objects.filter(job="settle").order_by("started_at"))
    # The interrupted run is recorded as failed (visible to staff), not left "running".
    assert [r.status for r in runs] == [JobRun.Status.FAILED, JobRun.Status.OK]
    assert "terminat" in runs[0].error or "connection" in runs[0].error.lower()
    assert runs[1].summary["settled"] == 4
