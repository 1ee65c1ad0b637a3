"""Small ORM factories shared by the test suites (stable names: other apps' tests import them).

make_market(...), make_competitor(...), make_cohort_with_entries(...), snapshot_row(...). Everything is created
through the ORM or the real services, never mocked.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from agents.models import Competitor
from cohorts.models import Cohort, Entry
from cohorts.services import open_cohort, week_start_for
from cohorts.snapshots import SnapshotRow
from markets.models import Market

_seq = itertools.count(1)


def make_market(
    question: str | None = None,
    *,
    outcomes: list[str] | tuple[str, ...] = ("Yes", "No"),
    prices: dict | None = None,
    status: str = Market.Status.OPEN,
    **fields,
) -> Market:
    """An open binary Yes/No market priced Yes 0.60 / No 0.40 unless told otherwise.

    `prices` maps outcome -> price (Decimal, str or float); it becomes Market.last_prices.
    """
    n = next(_seq)
    outcomes = list(outcomes)
    if prices is None:
        prices = (
            {"Yes": "0.60", "No": "0.40"}
            if outcomes == ["Yes", "No"]
            else {
                o: str((Decimal(1) / len(outcomes)).quantize(Decimal("0.0001"))) for o in outcomes
            }
        )
    fields.setdefault("kind", Market.Kind.BINARY if len(outcomes) == 2 else Market.Kind.MULTI)
    fields.setdefault("external_id", f"test-{n}")
    fields.setdefault("source", Market.Source.DEMO)
    fields.setdefault("last_priced_at", timezone.now())
    return Market.objects.create(
        question=question or f"Test market {n}?",
        outcomes=outcomes,
        last_prices={k: str(v) for k, v in prices.items()},
        status=status,
        **fields,
    )


def make_competitor(slug: str | None = None, **fields) -> Competitor:
    """An active baseline competitor (cash strategy) with one replicate."""
    n = next(_seq)
    slug = slug or f"competitor-{n}"
    fields.setdefault("display_name", slug.replace("-", " ").title())
    fields.setdefault("kind", Competitor.Kind.BASELINE)
    fields.setdefault("strategy", Competitor.Strategy.CASH)
    return Competitor.objects.create(slug=slug, **fields)


def make_cohort_with_entries(
    n_entries: int = 2,
    *,
    week_start: datetime | None = None,
    kind: str = Cohort.Kind.LIVE,
    competitors: list[Competitor] | None = None,
    at: datetime | None = None,
) -> tuple[Cohort, list[Entry]]:
    """A cohort opened by the real open_cohort service, with one entry per new competitor.

    Without `week_start` each call takes a distinct earlier week (before the current one),
    so several cohorts can coexist in one test.
    """
    if week_start is None:
        week_start = week_start_for(at or timezone.now()) - timedelta(weeks=next(_seq))
    if competitors is None:
        competitors = [make_competitor() for _ in range(n_entries)]
    cohort, created = open_cohort(
        week_start, kind=kind, competitors=competitors, at=at or week_start
    )
    if not created:
        raise ValueError(f"a {kind} cohort for {week_start:%Y-%m-%d} already exists in this test")
    return cohort, list(cohort.entries.order_by("pk"))


def snapshot_row(entry: Entry, ts: datetime, total) -> SnapshotRow:
    """An all-cash snapshot row of `total` (rounded to cents), for the series writers
    (cohorts.snapshots.store_snapshots) in tests."""
    total = Decimal(total).quantize(Decimal("0.01"))
    zero = Decimal("0.00")
    return SnapshotRow(
        entry_id=entry.pk, ts=ts, cash=total, positions_value=zero, total=total,
        realized_pnl=zero, unrealized_pnl=zero,
    )  # fmt: skip
