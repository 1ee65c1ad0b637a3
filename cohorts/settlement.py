"""Settling positions when a market resolves, voids, or has its resolution changed by staff.

Entered through after_resolution (the one thing that follows markets.resolution's
record_resolution, inside its transaction), and by settle_pending and the simulations to finish
a settlement an earlier run could not.

settle_market makes the live settlements of a market match the market's current status:
- resolved: every position on the winning outcome is paid $1 per share, the others 0. Money is
  exact to the cent per entry (sealed payout_rounding): an entry's live payouts add up to the
  dollar value of its live winning shares rounded half to even, so each payout is that rounded
  running total minus what the entry was already paid. A fraction of a cent carries over to the
  entry's next payout instead of being dropped per position (rounding each payout down would
  leave an entry with 58 winning positions up to 58 cents short). A staff reversal takes back
  exactly what its settlement paid; the entry's running total is trued again at its next payout;
- void: every position is refunded the cost basis it still holds;
- open/closed (staff reopened it): earlier settlements are reversed and the positions reopen.
A live settlement that disagrees with the status is reversed first (a REVERSAL ledger row takes
the payout back, the position gets its shares and cost basis back), then the new one applied, so
the balances end exactly as if the current outcome had been the first.

Every entry whose cash or positions a run changed gets a snapshot in the same transaction
(cohorts.snapshots.write_settlement_snapshots), so its value, cash, invested amount and open
count agree the moment the change commits; a staff correction never leaves a value that still
counts a reversed payout until the next tick (which, for a replay or demo cohort on its own
clock, may never come).

Concurrency: a run takes its locks in this order, the one every writer shares
(docs/architecture.md, "Lock order"):
1. the market row;
2. every entry holding the market, in pk order (execution takes the entry before its positions
   too, so a settlement and a decision cannot deadlock);
3. those entries' chart series heads in pk order, then their scope's series head
   (cohorts.series.write.lock_with_scopes; the snapshot tick takes these two without the entries);
4. the week seals and the scope's event log (seal_before_settlement appends a seal; the run's
   own events are appended last). A log append waits for any uncommitted append to the same
   scope (the (scope, seq) constraint), so the log must be the last lock: a run that sealed
   before taking steps 2 and 3 would hold the log while waiting for an entry or a series head
   that another run (a staff correction) holds while waiting to append, and PostgreSQL would
   refuse one of the two with "deadlock detected";
5. positions, settlements, ledger rows and snapshot rows, all of entries locked in step 2.
So two runs for one market serialise and the second finds nothing to do, two runs sharing an
entry or a scope serialise on it, and a staff correction never deadlocks with a settlement or
the snapshot tick; the partial unique constraint on live settlements backs this up.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Q

from cohorts.models import Cohort, Entry, LedgerEntry, Position, Settlement
from cohorts.seals import sealing as seals
from cohorts.seals import state as seal_state
from cohorts.series import write as series
from cohorts.snapshots import write_settlement_snapshots
from core import clock
from core.versions import data_changed
from markets.models import Market

log = logging.getLogger(__name__)

CENT = Decimal("0.01")
SETTLED_STATUSES = (Market.Status.RESOLVED, Market.Status.VOID)


class SettlementError(Exception):
    """The market cannot be settled as it stands (bad outcome, or a reversal would overdraw)."""


def flag_unsettleable(market_id: int, exc: Exception) -> None:
    """Put a market that cannot be settled on the staff attention list, with the reason."""
    Market.objects.filter(pk=market_id).update(
        needs_attention=True, attention_reason=f"settlement failed: {exc}"[:300]
    )


@dataclass
class SettleReport:
    market_id: int
    status: str
    settled: int = 0
    reversed: int = 0
    paid: Decimal = Decimal(0)
    taken_back: Decimal = Decimal(0)
    entries_finished: list[int] = field(default_factory=list)
    entries_touched: set[int] = field(default_factory=set)
    market_settled: bool = False


def _target(market: Market, position: Position) -> tuple[str, str] | None:
    """(kind, outcome) the position's live settlement should have, or None for 'unsettled'."""
    if market.status == Market.Status.VOID:
        return Settlement.Kind.VOID, ""
    if market.status == Market.Status.RESOLVED:
        won = position.outcome == market.resolved_outcome
        return (Settlement.Kind.WON if won else Settlement.Kind.LOST), market.resolved_outcome
    return None


def _payout(kind: str, shares: Decimal, cost_basis: Decimal, won: list[Decimal]) -> Decimal:
    """What one settlement pays. won = [exact dollars of the entry's live winning shares, dollars
    already paid for them], updated in place for a WON settlement (see the module docstring)."""
    if kind == Settlement.Kind.WON:
        exact, paid = won[0] + shares, won[1]
        payout = exact.quantize(CENT, rounding=ROUND_HALF_EVEN) - paid
        won[0], won[1] = exact, paid + payout
        return payout
    if kind == Settlement.Kind.VOID:
        return cost_basis
    return Decimal("0.00")


def _won_totals(entry_ids: set[int]) -> dict[int, list[Decimal]]:
    """Per entry, [shares, payouts] summed over its live WON settlements, in Decimal (read under
    the entries' row locks, which every settlement of those entries takes first)."""
    totals: dict[int, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    live_won = Settlement.objects.filter(
        position__entry_id__in=entry_ids, kind=Settlement.Kind.WON, reversed_at__isnull=True
    ).values_list("position__entry_id", "shares", "payout")
    for entry_id, shares, payout in live_won:
        totals[entry_id][0] += shares
        totals[entry_id][1] += payout
    return totals


def settle_market(market: Market, at: datetime | None = None) -> SettleReport:
    """Make the market's settlements match its status; idempotent. See the module docstring."""
    at = at if at is not None else clock.now()
    with transaction.atomic():
        data_changed()  # runs only if this transaction commits
        market = Market.objects.select_for_update().get(pk=market.pk)
        cash = _lock_entries(market)  # and their series: before the seal's log append
        seals.seal_before_settlement(market.pk)  # no payout against an unsealed week
        report = SettleReport(market_id=market.pk, status=market.status)
        if market.status == Market.Status.RESOLVED and market.resolved_outcome not in (
            market.outcomes or []
        ):
            raise SettlementError(
                f"market {market.pk} resolved to {market.resolved_outcome!r}, not one of its outcomes"
            )
        cash_delta: dict[int, Decimal] = defaultdict(Decimal)
        _reverse_stale(market, at, report, cash_delta)
        if market.status in SETTLED_STATUSES:
            _settle_open(market, at, report, cash_delta)
        _apply_cash(cash_delta, cash, market)
        _mark_market(market, at, report)
        _final_snapshots(report, at)
        seals.log_events(market_id=market.pk)  # the settlements join the chained event log
    if report.settled or report.reversed:
        log.info(
            "market %s: settled %d, reversed %d, paid %s, taken back %s",
            market.status,
            report.settled,
            report.reversed,
            report.paid,
            report.taken_back,
            extra={"market": market.pk},
        )
    return report


def _lock_entries(market: Market) -> dict[int, Decimal]:
    """Steps 2 and 3 of the lock order (module docstring): every entry holding the market, then
    their series heads and scope head (the run snapshots a subset of these entries); returns
    their cash as read under the lock."""
    entry_ids = Position.objects.filter(market=market).values("entry_id")
    locked = Entry.objects.select_for_update().filter(pk__in=entry_ids).order_by("pk")
    cash = dict(locked.values_list("pk", "cash"))
    series.lock_with_scopes(cash)
    return cash


def _reverse_stale(market: Market, at: datetime, report: SettleReport, cash_delta: dict) -> None:
    live = (
        Settlement.objects.select_for_update()
        .filter(market=market, reversed_at__isnull=True)
        .select_related("position")
        .order_by("pk")
    )
    reopened_entries: set[int] = set()
    for settlement in live:
        position = settlement.position
        if _target(market, position) == (settlement.kind, settlement.outcome):
            continue
        settlement.reversed_at = at
        settlement.save(update_fields=["reversed_at"])
        if settlement.payout:
            LedgerEntry.objects.create(
                entry_id=position.entry_id,
                kind=LedgerEntry.Kind.REVERSAL,
                amount=-settlement.payout,
                settlement=settlement,
                memo=f"reverse {settlement.kind} settlement {settlement.pk} of market {market.pk}",
                created_at=at,
            )
            cash_delta[position.entry_id] -= settlement.payout
        # The position gets back exactly what the settlement took from it.
        position.status = Position.Status.OPEN
        position.shares = settlement.shares
        position.cost_basis = settlement.cost_basis
        position.realized_pnl -= settlement.payout - settlement.cost_basis
        position.closed_at = None
        position.save(update_fields=["status", "shares", "cost_basis", "realized_pnl", "closed_at"])
        reopened_entries.add(position.entry_id)
        report.entries_touched.add(position.entry_id)
        report.reversed += 1
        report.taken_back += settlement.payout
    if reopened_entries:
        # A completed cohort with a reopened position is tracking again until it settles.
        reopened = Cohort.objects.filter(
            status=Cohort.Status.COMPLETED, entries__in=reopened_entries
        ).distinct()
        reopened_ids = list(reopened.values_list("pk", flat=True))
        Cohort.objects.filter(pk__in=reopened_ids).update(
            status=Cohort.Status.TRACKING, completed_at=None
        )
        seal_state.cohorts_changed(reopened_ids, fields=("status",))


def _settle_open(market: Market, at: datetime, report: SettleReport, cash_delta: dict) -> None:
    positions = list(
        Position.objects.select_for_update()
        .filter(market=market, status=Position.Status.OPEN)
        .order_by("pk")
    )
    settlements = []
    won = _won_totals({p.entry_id for p in positions})
    for position in positions:
        target = _target(market, position)
        assert target is not None  # only a resolved or void market settles open positions
        kind, outcome = target
        payout = _payout(kind, position.shares, position.cost_basis, won[position.entry_id])
        settlements.append(
            Settlement(
                position=position,
                market=market,
                kind=kind,
                outcome=outcome,
                shares=position.shares,
                cost_basis=position.cost_basis,
                payout=payout,
                settled_at=at,
            )
        )
        # Shares and cost basis stay on the row as the record of what was held.
        position.status = Position.Status.SETTLED
        position.closed_at = at
        position.realized_pnl += payout - position.cost_basis
    Settlement.objects.bulk_create(settlements)
    Position.objects.bulk_update(positions, ["status", "closed_at", "realized_pnl"])
    ledger_kind: dict[str, str] = {
        Settlement.Kind.WON: LedgerEntry.Kind.PAYOUT,
        Settlement.Kind.VOID: LedgerEntry.Kind.REFUND,
    }
    ledger = []
    for s in settlements:
        if s.payout:
            ledger.append(
                LedgerEntry(
                    entry_id=s.position.entry_id,
                    kind=ledger_kind[s.kind],
                    amount=s.payout,
                    settlement=s,
                    memo=f"{s.kind} settlement of market {market.pk}",
                    created_at=at,
                )
            )
            cash_delta[s.position.entry_id] += s.payout
        report.paid += s.payout
    LedgerEntry.objects.bulk_create(ledger)
    report.settled += len(settlements)
    report.entries_finished = sorted({p.entry_id for p in positions})
    report.entries_touched.update(report.entries_finished)


def _apply_cash(cash_delta: dict[int, Decimal], cash: dict[int, Decimal], market: Market) -> None:
    # The new balance is computed in Decimal from the cash read under the row lock (not as
    # SQL arithmetic, which SQLite would do in floating point).
    for entry_id in sorted(cash_delta):
        delta = cash_delta[entry_id]
        if not delta:
            continue
        if cash[entry_id] + delta < 0:
            raise SettlementError(
                f"reversing market {market.pk} would take ${-delta} from entry {entry_id}, "
                f"which has ${cash[entry_id]} left (the payout was already spent); fix by hand"
            )
        Entry.objects.filter(pk=entry_id).update(cash=cash[entry_id] + delta)


def _mark_market(market: Market, at: datetime, report: SettleReport) -> None:
    """settled_at is set only once no position of the market is open, cleared on reopen, and
    moved to this run's time when the run settled or reversed anything (a correction's new
    settlements are the ones that count)."""
    if market.status in SETTLED_STATUSES:
        still_open = Position.objects.filter(market=market, status=Position.Status.OPEN).exists()
        changed = report.settled or report.reversed
        settled_at = None if still_open else (at if changed else (market.settled_at or at))
    else:
        settled_at = None
    if settled_at != market.settled_at:
        Market.objects.filter(pk=market.pk).update(settled_at=settled_at)
    report.market_settled = settled_at is not None


def _final_snapshots(report: SettleReport, at: datetime) -> None:
    """Snapshot every entry the run changed (see the module docstring); entries_finished keeps
    only those with no open position left."""
    if not report.entries_touched:
        return
    still_open = set(
        Position.objects.filter(entry_id__in=report.entries_finished, status=Position.Status.OPEN)
        .values_list("entry_id", flat=True)
        .distinct()
    )
    report.entries_finished = [e for e in report.entries_finished if e not in still_open]
    write_settlement_snapshots(sorted(report.entries_touched), at)


def markets_needing_settlement() -> list[int]:
    """Market ids whose settlements do not match their status (the work settle_pending does)."""
    unsettled = Market.objects.filter(status__in=SETTLED_STATUSES, settled_at__isnull=True)
    # Reopened by staff but still marked settled.
    reopened = Market.objects.exclude(status__in=SETTLED_STATUSES).filter(settled_at__isnull=False)
    # Resolution changed after settling: a live settlement disagrees with the market.
    stale = Settlement.objects.filter(reversed_at__isnull=True).filter(
        Q(market__status=Market.Status.VOID) & ~Q(kind=Settlement.Kind.VOID)
        | Q(market__status=Market.Status.RESOLVED) & Q(kind=Settlement.Kind.VOID)
        | Q(market__status=Market.Status.RESOLVED) & ~Q(outcome=F("market__resolved_outcome"))
        | ~Q(market__status__in=SETTLED_STATUSES)
    )
    ids = set(unsettled.values_list("pk", flat=True))
    ids |= set(reopened.values_list("pk", flat=True))
    ids |= set(stale.values_list("market_id", flat=True).distinct())
    return sorted(ids)


def after_resolution(market: Market) -> SettleReport:
    """Everything the competition does once a market's resolution is recorded
    (markets.resolution.record_resolution sends markets.signals.market_resolved inside its
    transaction; cohorts.receivers dispatches it here). In order, all in that transaction, at
    the clock of record's now (a replay's or the demo's simulated time):

    1. lock the market, the entries holding it and their chart series (the lock order in the
       module docstring), then seal every unsealed week whose universe holds the market
       (seals.seal_before_settlement), so no payout is computed against decisions that are
       not sealed yet;
    2. settle the market's open positions, or reverse settlements the new status contradicts
       (ledger rows and cash in Decimal);
    3. snapshot every entry whose cash or positions changed and rebuild its chart series from
       that point (snapshots.write_settlement_snapshots);
    4. append the resolution change and the settlements to the scope's chained event log
       (seals.log_events).

    Steps 1-4 are settle_market. A market that cannot be settled as it stands goes on the
    staff attention list with the reason, and the error propagates so the caller counts it
    (or refuses the change). The rescore request is the caller's, sent on commit.
    """
    try:
        return settle_market(market)
    except SettlementError as exc:
        flag_unsettleable(market.pk, exc)
        raise


def settle_pending(at: datetime | None = None) -> dict:
    """Settle every market whose settlements lag its status. One market's failure (logged and
    counted) does not stop the others."""
    summary: dict[str, Any] = {"markets": 0, "settled": 0, "reversed": 0, "paid": "0", "errors": []}
    paid = Decimal(0)
    for market_id in markets_needing_settlement():
        try:
            report = settle_market(Market(pk=market_id), at=at)
        except SettlementError as exc:
            log.error("cannot settle a market", extra={"market": market_id, "reason": exc})
            summary["errors"].append(str(exc))
            flag_unsettleable(market_id, exc)
            continue
        summary["markets"] += 1
        summary["settled"] += report.settled
        summary["reversed"] += report.reversed
        paid += report.paid
    summary["paid"] = str(paid)
    return summary
