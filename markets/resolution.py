"""The one way a market's resolution is recorded, whoever decides it.

Upstream detection (markets.upstream), staff corrections (markets.corrections), the replay and
the demo (simulations) all call `record_resolution`, so every change of a market's resolution,
in every scope, leaves the same trace: the market row, one ResolutionChange audit row stamped
with the scope's clock (core.clock), and the same follow-up in the same order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import DatabaseError, transaction

from core import clock
from core.versions import data_changed
from markets import signals
from markets.models import Market, ResolutionChange

log = logging.getLogger(__name__)

OPEN, CLOSED = Market.Status.OPEN, Market.Status.CLOSED
RESOLVED, VOID = Market.Status.RESOLVED, Market.Status.VOID
FINAL = (RESOLVED, VOID)
UNRESOLVED = (OPEN, CLOSED)


Settlement = Literal["settled", "unavailable", "failed"]


@dataclass(frozen=True)
class Recorded:
    """What record_resolution did: the audit row, and how the settlement went ("unavailable":
    nobody listens; "failed": it raised and `settle_failures="keep"` kept the resolution)."""

    change: ResolutionChange
    settlement: Settlement


def record_resolution(
    market: Market | int,
    *,
    status: str,
    outcome: str = "",
    by: str,
    reason: str,
    at: datetime | None = None,
    user: Any = None,
    only_unresolved: bool = False,
    settle_failures: Literal["raise", "keep"] = "raise",
    rescore: bool = True,
    market_fields: dict[str, Any] | None = None,
) -> Recorded | None:
    """Set the market's resolution and write its ResolutionChange, then bring everything that
    depends on it in line, all in one transaction.

    `status`: resolved (to `outcome`), void, or open/closed (a staff reopen: the outcome is
    cleared and upstream detection takes the market back). `by` is a Market.ResolvedBy value,
    `at` when the market resolved (default: now on the clock of record); the audit row's
    changed_at and the market's updated_at are the clock of record's now, so a replay or the
    demo, running on a simulated clock, stamps simulated time. `only_unresolved`: record only if
    the market is still open/closed (automatic sources: a rerun or a racing run finds it final
    and returns None). `market_fields`: more columns to write with the resolution (the closing
    quote a simulation knows).

    `resolution_recorded_at` is when the arena recorded this state, on the clock of record (a
    reopen and a correction restamp it, like the first resolution): scoring counts a resolution
    known at a run's as_of by it, not by `at` (scoring.load.known_at). It is written with the
    change and stamped again as the last write before returning, after the settlement, so it
    is at or after the audit row's changed_at.

    What follows, in this order, inside the same transaction:
    1. `markets.signals.market_resolved` is sent. Its receiver (cohorts.receivers) calls
       cohorts.settlement.after_resolution, which seals every unsealed week whose universe
       holds the market (no payout against unsealed decisions), settles or reverses the
       positions, writes the touched entries' snapshots and rebuilds their chart series from
       that point, and appends the change and its settlements to the scope's chained event log.
       The receiver's writes are part of this transaction on purpose: a staff correction whose
       reversal cannot be paid back is refused whole, and a simulation's settlement lands
       before the snapshot of the same tick. `settle_failures` says what a failed settlement
       does: "raise" (its exception propagates and nothing is recorded) or "keep" (the
       settlement's savepoint is rolled back, the resolution stays, the market stays tracked;
       settle_pending and the snapshot tick retry it, and the tick's event-log catch-up logs
       the change).
    2. A market final and settled stops being tracked (nobody can hold it any more).
    On commit, and only then: the pages' data version moves, and, if `rescore`,
    `markets.signals.resolutions_changed` asks for a rescore (scoring debounces it). A rollback
    of the caller's transaction undoes all of the above, and nothing leaves it: no rescore
    request, no page invalidation.
    """
    pk = market if isinstance(market, int) else market.pk
    now = clock.now()
    with transaction.atomic():
        current = Market.objects.select_for_update().get(pk=pk)
        if only_unresolved and current.status not in UNRESOLVED:
            return None
        final = status in FINAL
        Market.objects.filter(pk=pk).update(
            status=status,
            resolved_outcome=outcome,
            resolved_at=(at or now) if final else None,
            # Cleared on reopen so the hourly upstream check takes the market back.
            resolved_by=by if final else "",
            resolution_recorded_at=now,
            updated_at=now,
            **(market_fields or {}),
        )
        change = ResolutionChange.objects.create(
            market_id=pk,
            changed_by=user if getattr(user, "pk", None) else None,
            source=by,
            changed_at=now,
            made_at=clock.wall(),
            from_status=current.status,
            from_outcome=current.resolved_outcome,
            to_status=status,
            to_outcome=outcome,
            reason=reason,
        )
        settlement = _follow(Market.objects.get(pk=pk), settle_failures)
        # Stamped again after the settlement's writes, as near the commit (when a score run can
        # first read the resolution) as the transaction can stamp anything; on a simulated or
        # accelerated clock the settlement itself spans arena minutes.
        recorded_at = max(now, clock.now())
        if recorded_at != now:
            Market.objects.filter(pk=pk).update(resolution_recorded_at=recorded_at)
        data_changed()
        if rescore:
            transaction.on_commit(request_rescore)
    return Recorded(change=change, settlement=settlement)


def _follow(market: Market, settle_failures: str) -> Settlement:
    if settle_failures == "raise":
        return "settled" if settle(market) else "unavailable"
    try:
        with transaction.atomic():  # a failed settlement rolls back only itself
            return "settled" if settle(market) else "unavailable"
    except DatabaseError:
        raise  # the connection is in doubt: undo the resolution too, the next run retries
    except Exception:
        log.exception("settling a market failed; retried by the next resolve/snapshot",
                      extra={"market": market.pk})  # fmt: skip
        return "failed"


def settle(market: Market) -> bool:
    """Ask the packages above (cohorts) to bring settlements in line with the market's
    resolution, inside the caller's transaction; False if nobody is listening (markets used on
    its own). Once a final market is settled nobody can hold it any more, so it stops being
    tracked."""
    if not signals.market_resolved.has_listeners(sender=Market):
        log.warning("no receiver for market_resolved; settlement skipped")
        return False
    signals.market_resolved.send(sender=Market, market=market)
    # Settlement sets settled_at once no position of the market is left open.
    Market.objects.filter(pk=market.pk, status__in=FINAL, settled_at__isnull=False).update(
        tracked=False
    )
    return True


def request_rescore() -> None:
    """Scores depend on resolutions (Brier needs the outcome even where nobody held a
    position). Sent after the commit, robustly: the resolution stands either way, and the
    hourly score run catches up if a receiver fails."""
    for receiver, result in signals.resolutions_changed.send_robust(sender=Market):
        if isinstance(result, Exception):
            log.error("resolutions_changed receiver %r failed: %s", receiver, result)
