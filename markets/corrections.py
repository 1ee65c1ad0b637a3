"""Staff corrections of a market's resolution (the admin's resolve / void / reopen actions).

A correction is all or nothing: it goes through markets.resolution.record_resolution with
`settle_failures="raise"`, so a change whose settlement cannot follow (a reversal of a payout
that was already spent, a database error mid-way) changes nothing and is returned to staff with
the reason, and the books and the market never disagree.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import transaction

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
    try:
        with transaction.atomic():
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
        "staff changed market %s from %s to %s%s (%s)",
        market.pk, change.from_status, status, f" {outcome}" if outcome else "", reason,
    )  # fmt: skip
    market.refresh_from_db()
    return change


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
