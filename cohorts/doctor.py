"""`arena doctor`: prove the money invariants over the whole database, one query per check.

Each check returns human-readable violations; an empty list means the books are healthy.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Abs

from cohorts.models import Entry, LedgerEntry, Position, Settlement, Snapshot
from markets.models import Market

LIMIT = 50  # violations listed per check; a broken invariant usually breaks it many times


def _cash_equals_ledger() -> list[str]:
    sums = dict(
        LedgerEntry.objects.values("entry_id")
        .annotate(total=Sum("amount"))
        .values_list("entry_id", "total")
    )
    out = []
    for entry_id, cash in Entry.objects.values_list("pk", "cash").iterator():
        ledger = (sums.get(entry_id) or Decimal(0)).quantize(Decimal("0.01"))
        if cash != ledger:
            out.append(f"entry {entry_id}: cash {cash} != ledger sum {ledger}")
    return out


def _cash_nonnegative() -> list[str]:
    return [
        f"entry {pk}: cash {cash} is negative"
        for pk, cash in Entry.objects.filter(cash__lt=0).values_list("pk", "cash")[:LIMIT]
    ]


def _positions_sane() -> list[str]:
    bad = Position.objects.filter(
        Q(shares__lt=0) | Q(cost_basis__lt=0) | Q(status=Position.Status.OPEN, shares=0)
    ).values_list("pk", "status", "shares", "cost_basis")[:LIMIT]
    return [f"position {pk} ({status}): shares {s}, cost basis {c}" for pk, status, s, c in bad]


def _one_open_position_per_side() -> list[str]:
    dupes = (
        Position.objects.filter(status=Position.Status.OPEN)
        .values("entry_id", "market_id", "outcome")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)[:LIMIT]
    )
    return [
        f"entry {d['entry_id']}: {d['n']} open positions on market {d['market_id']} {d['outcome']!r}"
        for d in dupes
    ]


def _one_live_settlement() -> list[str]:
    dupes = (
        Settlement.objects.filter(reversed_at__isnull=True)
        .values("position_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)[:LIMIT]
    )
    return [f"position {d['position_id']}: {d['n']} live settlements" for d in dupes]


def _settled_positions_have_settlement() -> list[str]:
    live = Settlement.objects.filter(reversed_at__isnull=True)
    orphans = Position.objects.filter(status=Position.Status.SETTLED).exclude(
        pk__in=live.values("position_id")
    )
    wrong = live.exclude(position__status=Position.Status.SETTLED)
    return [
        f"position {pk} is settled without a live settlement"
        for pk in orphans.values_list("pk", flat=True)[:LIMIT]
    ] + [
        f"settlement {pk} is live but position {pos} is {st}"
        for pk, pos, st in wrong.values_list("pk", "position_id", "position__status")[:LIMIT]
    ]


def _settled_markets_closed_out() -> list[str]:
    rows = (
        Position.objects.filter(status=Position.Status.OPEN, market__settled_at__isnull=False)
        .values("market_id")
        .annotate(n=Count("pk"))[:LIMIT]
    )
    return [
        f"market {r['market_id']} is marked settled but has {r['n']} open positions" for r in rows
    ]


def _settled_markets_resolved() -> list[str]:
    rows = (
        Market.objects.filter(settled_at__isnull=False)
        .exclude(status__in=[Market.Status.RESOLVED, Market.Status.VOID])
        .values_list("pk", "status")[:LIMIT]
    )
    return [
        f"market {pk} is {status} but marked settled (reopened, not yet reversed)"
        for pk, status in rows
    ]


def _snapshot_totals() -> list[str]:
    # SQLite keeps decimals as floats, so an exact SQL equality fails on sums like
    # 9311.49 + 669.29; every amount is whole cents, so any real mismatch is >= 0.01.
    bad = (
        Snapshot.objects.annotate(gap=Abs(F("total") - F("cash") - F("positions_value")))
        .filter(gap__gte=Decimal("0.005"))
        .values_list("pk", "entry_id", "ts", "total", "cash", "positions_value")[:LIMIT]
    )
    return [
        f"snapshot {pk} (entry {e}, {ts:%Y-%m-%d %H:%M}): total {t} != cash {c} + positions {v}"
        for pk, e, ts, t, c, v in bad
    ]


CHECKS: list[tuple[str, Callable[[], list[str]]]] = [
    ("cash equals ledger sum", _cash_equals_ledger),
    ("cash is not negative", _cash_nonnegative),
    ("positions have sane shares and cost", _positions_sane),
    ("one open position per entry/market/outcome", _one_open_position_per_side),
    ("one live settlement per position", _one_live_settlement),
    ("settled positions match live settlements", _settled_positions_have_settlement),
    ("settled markets have no open positions", _settled_markets_closed_out),
    ("settled markets are resolved or void", _settled_markets_resolved),
    ("snapshot total equals cash + positions", _snapshot_totals),
]


def check_invariants() -> list[str]:
    """Every violation found, prefixed by its check's name (empty list: healthy)."""
    return [f"{name}: {problem}" for name, check in CHECKS for problem in check()]
