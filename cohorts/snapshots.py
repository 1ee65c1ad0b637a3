"""Marking every open position to market and writing one Snapshot per entry per 10 minutes.

The tick is bulk: a fixed handful of queries however many entries there are (entries with their
realised P/L, their open positions with the quotes of the markets they are on, then one upsert
per batch of rows), with the arithmetic done in Python. The naive shape (one positions query per
entry) costs thousands of round trips per tick; bench/snapshot.py measures both.

Marking rules:
- a resolved (not yet settled) market marks the winning outcome at 1 and the others at 0;
- a void market, or one with no usable quote, marks the position at its cost basis;
- otherwise the latest quote (Market.last_prices), which a closed-but-unresolved market keeps,
  so its positions keep their last known price.
Values are summed per entry and rounded half-even to cents once, so total == cash + positions
value exactly, and total == initial balance + realised + unrealised P/L.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import NamedTuple

from django.db import transaction
from django.db.models import OuterRef, Q, Subquery, Sum

from cohorts.models import Cohort, Entry, Position, Snapshot
from cohorts.scope import KIND_FOR_SOURCE, live_path_kind, on_live_path
from cohorts.series import write as series
from cohorts.series.grid import upsert
from core import clock
from core.versions import values_changed
from markets.models import Market
from markets.pricing import outcome_price

CENT = Decimal("0.01")
BUCKET_MINUTES = 10
SNAPSHOT_FIELDS = ["cash", "positions_value", "total", "realized_pnl", "unrealized_pnl"]


class SnapshotRow(NamedTuple):
    """One Snapshot row to store: what a tick computes and store_snapshots writes. Not a model
    instance, which is only taken apart again for the upsert (building 70,000 of them was 0.7 s
    of the default demo)."""

    entry_id: int
    ts: datetime
    cash: Decimal
    positions_value: Decimal
    total: Decimal
    realized_pnl: Decimal
    unrealized_pnl: Decimal


def bucket_for(at: datetime) -> datetime:
    """`at` floored to its 10-minute bucket."""
    return at.replace(minute=at.minute - at.minute % BUCKET_MINUTES, second=0, microsecond=0)


def _mark_price(market: tuple, outcome: str) -> Decimal | None:
    status, resolved_outcome, last_prices, outcomes = market
    if status == Market.Status.RESOLVED and resolved_outcome in (outcomes or []):
        return Decimal(1) if outcome == resolved_outcome else Decimal(0)
    if status == Market.Status.VOID:
        return None
    return outcome_price(last_prices, outcomes, outcome)


@dataclass
class Book:
    """What a tick values, as read at one moment: the entries (pk, cash, realised P/L) and
    their open positions with the marks of their markets (entry, market, outcome, shares, cost
    basis, then the market's status, resolved outcome, last_prices, outcomes)."""

    entries: list[tuple]
    positions: list[tuple]

    def requote(self, quotes: dict[int, dict[str, str]]) -> None:
        """Markets' quotes (market id -> last_prices) written since the read: the book then
        values as a fresh read would, as long as nothing else about its entries moved."""
        if quotes:
            self.positions = [
                (*p[:7], quotes[p[1]], p[8]) if p[1] in quotes else p for p in self.positions
            ]


def compute_snapshots(entry_filter: Q, ts: datetime) -> list[SnapshotRow]:
    """The Snapshot rows at `ts` for the entries matching `entry_filter` (2 queries: the
    entries with their realised P/L, and their open positions with the markets' marks; every
    tick runs it, so each round trip saved is saved 144 times a day)."""
    return value_book(read_book(entry_filter), ts)


def read_book(entry_filter: Q) -> Book:
    entries = list(
        Entry.objects.filter(entry_filter)
        .annotate(realized=Sum("positions__realized_pnl"))
        .values_list("pk", "cash", "realized")
    )
    if not entries:
        return Book([], [])
    positions = list(
        Position.objects.filter(
            status=Position.Status.OPEN,
            entry__in=Entry.objects.filter(entry_filter).values("pk"),
        ).values_list(
            "entry_id",
            "market_id",
            "outcome",
            "shares",
            "cost_basis",
            "market__status",
            "market__resolved_outcome",
            "market__last_prices",
            "market__outcomes",
        )
    )
    return Book(entries, positions)


def value_book(book: Book, ts: datetime) -> list[SnapshotRow]:
    """The book's Snapshot rows at `ts` (no query)."""
    entries, positions = book.entries, book.positions
    markets = {row[1]: row[5:] for row in positions}
    realized = {entry_id: total for entry_id, _cash, total in entries}

    value: dict[int, Decimal] = defaultdict(Decimal)
    cost: dict[int, Decimal] = defaultdict(Decimal)
    price_cache: dict[tuple[int, str], Decimal | None] = {}
    for entry_id, market_id, outcome, shares, cost_basis, *_market in positions:
        key = (market_id, outcome)
        if key not in price_cache:
            price_cache[key] = _mark_price(markets[market_id], outcome)
        price = price_cache[key]
        value[entry_id] += cost_basis if price is None else shares * price
        cost[entry_id] += cost_basis

    rows = []
    for entry_id, cash, _realized in entries:
        positions_value = value[entry_id].quantize(CENT, rounding=ROUND_HALF_EVEN)
        rows.append(
            SnapshotRow(
                entry_id=entry_id,
                ts=ts,
                cash=cash,
                positions_value=positions_value,
                total=cash + positions_value,
                realized_pnl=(realized.get(entry_id) or Decimal(0)).quantize(CENT),
                unrealized_pnl=positions_value - cost[entry_id],
            )
        )
    return rows


def store_snapshots(rows: Sequence[SnapshotRow]) -> int:
    """Upsert snapshot rows and fold them into the chart series, in one transaction.

    The only way snapshots are written (ticks, settlement, replays, the demo), so the series
    never lag the table. One statement per batch; a rerun in the same bucket overwrites the
    bucket's row.
    """
    if not rows:
        return 0
    with transaction.atomic():
        heads = series.lock(r.entry_id for r in rows)  # before the rows: see series.lock
        # Plain rows (cohorts.series.grid.upsert): the ORM's per-instance insert compilation cost more
        # than the write.
        upsert(Snapshot, [r._asdict() for r in rows], ["entry", "ts"], SNAPSHOT_FIELDS)
        series.record(heads, [(r.entry_id, r.ts, r.total) for r in rows])
        values_changed()
    return len(rows)


def snapshot_cohorts(at: datetime, cohorts: Iterable[Cohort] | None = None) -> Q:
    """The entry filter of a tick: the given cohorts, else live cohorts still running at `at`."""
    if cohorts is not None:
        return Q(cohort__in=[c.pk if isinstance(c, Cohort) else c for c in cohorts])
    return Q(
        cohort__kind=live_path_kind(),
        cohort__status__in=[Cohort.Status.ACTIVE, Cohort.Status.TRACKING],
        cohort__week_start__lte=at,
    )


def take_snapshot(at: datetime | None = None, cohorts: Iterable[Cohort] | None = None) -> int:
    """Snapshot every entry of the cohorts (default: running live cohorts) in `at`'s bucket.

    Returns the number of rows written. Idempotent per bucket; replay/demo pass their cohorts
    and a simulated `at`.
    """
    at = at if at is not None else clock.now()
    return store_snapshots(compute_snapshots(snapshot_cohorts(at, cohorts), bucket_for(at)))


def write_settlement_snapshots(entry_ids: Iterable[int], at: datetime) -> int:
    """Snapshots for entries a settlement (or its staff reversal) just changed, so the entry's
    latest snapshot always reflects the change.

    A live entry gets one in `at`'s bucket (the next tick overwrites it with the same state).
    A replay or demo entry runs on its cohort's simulated clock, which `at` (the wall clock of
    a staff correction) knows nothing about: its latest snapshot, its clock's "now", is
    rewritten instead. A row at the wall-clock time would stand alone past (or inside) its
    siblings' history and draw a spike in every average over them.
    """
    entry_ids = list(entry_ids)
    if not entry_ids:
        return 0
    bucket = bucket_for(at)
    # Each simulated entry's latest snapshot: one backward probe of Snapshot(entry, ts) per
    # entry (the snapshot table, not the chart series, is the record of what exists).
    latest_ts = Snapshot.objects.filter(entry=OuterRef("pk")).order_by("-ts").values("ts")[:1]
    latest = dict(
        Entry.objects.filter(pk__in=entry_ids)
        .exclude(cohort__kind=live_path_kind())
        .annotate(latest=Subquery(latest_ts))
        .filter(latest__isnull=False)
        .values_list("pk", "latest")
    )
    by_ts: dict[datetime, list[int]] = defaultdict(list)
    for entry_id in entry_ids:
        by_ts[latest.get(entry_id, bucket)].append(entry_id)
    written = 0
    for ts, ids in by_ts.items():
        written += store_snapshots(compute_snapshots(Q(pk__in=ids), ts))
        # A correction dated before the rewritten row (a replay's simulated clock, a
        # settlement run for a past time) must not leave a chart drawing the old outcome
        # there: the entries' chart series are recomputed from their snapshot rows from `at`
        # on, in the settlement's transaction. Dated at or after it, the only row that changed
        # is the one at `ts`, which store_snapshots has just folded into the series (as the
        # latest point, or by its own rewind when older than the series' head).
        if at < ts:
            series.rebuild_entries(ids, since=at)
    return written


def scope_time_of(market: Market) -> datetime | None:
    """The clock of a simulated market's scope: the latest snapshot of its cohorts (the instant
    the scope is scored as of; never after now), or None for a live market or a scope that
    has not ticked yet (then the wall clock is its clock too)."""
    kind = KIND_FOR_SOURCE.get(market.source)
    # Live markets, and the rehearsal's when this process runs it, are on this clock of record.
    if kind is None or kind == Cohort.Kind.LIVE or on_live_path(kind):
        return None
    latest = (
        Snapshot.objects.filter(entry__cohort__kind=kind)
        .order_by("-ts")
        .values_list("ts", flat=True)
        .first()
    )
    return None if latest is None else min(latest, clock.now())
