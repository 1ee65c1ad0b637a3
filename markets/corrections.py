"""Staff corrections of a market's resolution (the admin's resolve / void / reopen actions).

A correction is all or nothing: it goes through markets.resolution.record_resolution with
`settle_failures="raise"`, so a change whose settlement cannot follow (a reversal of a payout
that was already spent, a database error mid-way) changes nothing and is returned to staff with
the reason, and the books and the market never disagree.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from core import clock
from markets import signals
from markets.models import Market, ResolutionChange
from markets.resolution import RESOLVED, record_resolution

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
    on_scope_clock = clock.running_on(lambda: scope_at) if scope_at is not None else nullcontext()
    try:
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
    except ValidationError:
        raise
    except Exception as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        log.warning(
            "staff change of market %s to %s%s refused, nothing changed: %s",
            market.pk, status, f" {outcome}" if outcome else "", why,
        )  # fmt: skip
        raise ValidationError(f"Not changed, the settlement cannot follow: {why}") from exc
    assert recorded is not None  # unconditional: only `only_unresolved` records skip
    change = recorded.change
    log.info(
        "staff changed market=%s from %s to %s reason=%s%s",
        market.pk, _state(change.from_status, change.from_outcome), _state(status, outcome),
        reason, f" scope_time={scope_at.isoformat()}" if scope_at is not None else "",
    )  # fmt: skip
    market.refresh_from_db()
    return change


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
