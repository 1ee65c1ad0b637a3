from datetime import UTC, datetime, timedelta
from decimal import Decimal

from agents.models import Competitor
from cohorts.models import Cohort, Entry, Snapshot
from cohorts.retention import rollup_snapshots


def _entry(n):
    comp = Competitor.objects.create(
        slug=f"c{n}", display_name=f"C{n}", kind="baseline", strategy="cash"
    )
    cohort, _ = Cohort.objects.get_or_create(
        kind="demo", week_start=datetime(2026, 1, 4, tzinfo=UTC)
    )
    return Entry.objects.create(cohort=cohort, competitor=comp, cash=Decimal("10000"))


def _snap(entry, ts, total):
    return Snapshot(
        entry=entry,
        ts=ts,
        cash=total,
        positions_value=0,
        total=total,
        realized_pnl=0,
        unrealized_pnl=0,
    )


def test_old_rows_roll_up_to_the_last_of_each_hour_recent_rows_stay(db):
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    a, b = _entry(1), _entry(2)
    rows = []
    old_start = now - timedelta(days=20)
    for e in (a, b):
        for i in range(18):  # three hours of 10-minute rows, 20 days ago
            rows.append(_snap(e, old_start + timedelta(minutes=10 * i), Decimal(10000 + i)))
        for i in range(6):  # the last hour, recent
            rows.append(_snap(e, now - timedelta(minutes=60 - 10 * i), Decimal(20000 + i)))
    Snapshot.objects.bulk_create(rows)

    deleted = rollup_snapshots(keep_days=14, at=now)

    assert deleted == 2 * (18 - 3)
    kept_old = list(
        Snapshot.objects.filter(entry=a, ts__lt=now - timedelta(days=14))
        .order_by("ts")
        .values_list("ts", "total")
    )
    # One row per hour, each the last value of its hour at its own time.
    assert kept_old == [
        (old_start + timedelta(minutes=50), Decimal("10005.00")),
        (old_start + timedelta(minutes=110), Decimal("10011.00")),
        (old_start + timedelta(minutes=170), Decimal("10017.00")),
    ]
    assert Snapshot.objects.filter(entry=b, ts__gte=now - timedelta(days=14)).count() == 6
    # Idempotent: a second pass finds nothing more to remove.
    assert rollup_snapshots(keep_days=14, at=now) == 0
