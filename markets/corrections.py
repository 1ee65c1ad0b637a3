"""Staff corrections of a market's resolution (the admin's resolve / void / reopen actions).

A correction is all or nothing: it goes through markets.resolution.record_resolution with
`settle_failures="raise"`, so a change whose settlement cannot follow (a reversal of a payout
that was already spent, a database error mid-way) changes nothing and is returned to staff with
the reason, and the books and the market never disagree.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.core.exceptions import ValidationError
from django.db import transaction

from core import clock
from markets import signals
from markets.models import Market, ResolutionChange
from markets.resolution import RESOLVED, Recorded, record_resolution

log = logging.getLogger(__name__)


def set_resolution(
    market: Market,
    *,
    status: str,
    outcome: str = "",
    user=None,
    reason: str,
) -> ResolutionChange:
    """Staff sets a market's resolution: resolved to one of its outcomes, void (50-50), or
    reopened (open/closed, outcome cleared, upstream detection resumes). Writes the audit row
    and brings settlements in line (which may reverse an earlier settlement) in one
    transaction; see record_resolution for everything that follows.

    Raises ValidationError for a bad request, and for a change that cannot be carried out:
    then nothing is changed, the reason is logged and returned to staff.
    """
    reason = (reason or "").strip()
    outcome = (outcome or "").strip()
    _validate(market, status, outcome, reason)
    scope_at = scope_time(market)
    try:
        recorded = _record(market, status, outcome, user, reason, scope_at)
    except ValidationError:
        raise
    except Exception as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        log.warning(
            "staff change of market %s to %s%s refused, nothing changed: %s",
            market.pk, status, f" {outcome}" if outcome else "", why,
        )  # fmt: skip
        raise ValidationError(f"Not changed, the settlement cannot follow: {why}") from exc
    change = recorded.change
    log.info(
        "staff changed market=%s from %s to %s reason=%s%s",
        market.pk, _state(change.from_status, change.from_outcome), _state(status, outcome),
        reason, f" scope_time={scope_at.isoformat()}" if scope_at is not None else "",
    )  # fmt: skip
    market.refresh_from_db()
    return change


def _record(
    market: Market, status: str, outcome: str, user, reason: str, scope_at: datetime | None
) -> Recorded:
    """The change itself, on the market's scope clock, in one transaction (the caller's
    savepoint when it previews)."""
    on_scope_clock = clock.running_on(lambda: scope_at) if scope_at is not None else nullcontext()
    with on_scope_clock, transaction.atomic():
        current = Market.objects.select_for_update().get(pk=market.pk)
        if current.status == status and current.resolved_outcome == outcome:
            raise ValidationError(
                f"The market is already {status}{' to ' + outcome if outcome else ''}."
            )
        recorded = record_resolution(
            market.pk,
            status=status,
            outcome=outcome,
            by=Market.ResolvedBy.ADMIN,
            reason=reason,
            user=user,
            market_fields={
                "tracked": True,  # until settled again
                "needs_attention": False,
                "attention_reason": "",
            },
        )
    assert recorded is not None  # unconditional: only `only_unresolved` records skip
    return recorded


class PreviewReader(Protocol):
    """One package's view of what a correction changes (cohorts: settlements, cash and P/L;
    scoring: ranks and headline scores), read inside the dry run: `before` on the data as it
    stands, `after` on the corrected data, both in the same uncommitted transaction."""

    def before(self, markets: list[Market], deadline: float) -> Any: ...

    def after(self, markets: list[Market], before: Any, deadline: float) -> Any: ...


@dataclass
class Preview:
    """What a correction would do: per market, the reason it would be refused (blank: it
    would apply), and each reader's `after` answer, in reader order."""

    refused: dict[int, str] = field(default_factory=dict)
    sections: list[Any] = field(default_factory=list)


class _DryRun(Exception):
    """Raised to roll the preview's transaction back."""


def preview_resolution(
    markets: list[Market],
    *,
    status: str,
    outcome: str = "",
    readers: list[PreviewReader],
    budget_s: float = 4.0,
) -> Preview:
    """Carry out the correction inside a transaction that is always rolled back, and let each
    reader compare before and after: nothing is written, no page version moves and no rescore
    is asked for (record_resolution's on-commit work is dropped with the savepoint). `budget_s`
    bounds the readers' time: each reader checks the deadline and says what it skipped."""
    outcome = (outcome or "").strip()
    preview = Preview()
    deadline = time.monotonic() + budget_s
    try:
        with transaction.atomic():
            applicable = []
            for market in markets:
                try:
                    _validate(market, status, outcome, "preview")
                    if market.status == status and market.resolved_outcome == outcome:
                        raise ValidationError(f"already {_state(status, outcome)}")
                except ValidationError as exc:
                    preview.refused[market.pk] = " ".join(exc.messages)
                else:
                    applicable.append(market)
            befores = [reader.before(applicable, deadline) for reader in readers]
            for market in applicable:
                try:
                    with transaction.atomic():
                        _record(market, status, outcome, None, "preview", scope_time(market))
                except Exception as exc:  # the real change would be refused with this reason
                    preview.refused[market.pk] = f"{type(exc).__name__}: {exc}"[:300]
            done = [m for m in applicable if m.pk not in preview.refused]
            preview.sections = [
                reader.after(done, state, deadline)
                for reader, state in zip(readers, befores, strict=True)
            ]
            raise _DryRun
    except _DryRun:
        pass
    return preview


def scope_time(market: Market) -> datetime | None:
    """The clock of the market's scope (a replay's or the demo's latest simulated instant), or
    None for a live market, whose corrections take the wall clock."""
    responses: list[tuple[object, object]] = list(
        signals.scope_time.send(sender=Market, market=market)
    )
    answers = [answer for _, answer in responses if isinstance(answer, datetime)]
    return max(answers) if answers else None


def _state(status: str, outcome: str) -> str:
    """'resolved No', 'void', 'open': a resolution as the log shows it."""
    return f"{status} {outcome}" if outcome else status


def _validate(market: Market, status: str, outcome: str, reason: str) -> None:
    if not reason:
        raise ValidationError("A reason is required.")
    if status not in Market.Status.values:
        raise ValidationError(f"Unknown status {status!r}.")
    if status == RESOLVED and outcome not in market.outcomes:
        raise ValidationError(
            f"{outcome!r} is not one of this market's outcomes {market.outcomes}."
        )
    if status != RESOLVED and outcome:
        raise ValidationError("Only a resolved market has an outcome.")
