"""What a staff correction of a market's resolution did to the books, in words for the admin's
result message, from the settlement rows the correction wrote. Registered with
markets.admin.IMPACT, since only this floor knows positions and settlements (the figures
before and after are cohorts.correction_preview's)."""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Count, Q, Sum

from cohorts.models import Settlement
from markets.models import ResolutionChange


def _money(amount: Decimal | None) -> str:
    return f"${amount or Decimal(0):,.2f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class SettlementImpact:
    def result(self, change: ResolutionChange) -> str:
        at = change.changed_at
        rows = Settlement.objects.filter(market_id=change.market_id).aggregate(
            reversed=Count("id", filter=Q(reversed_at__gte=at)),
            taken_back=Sum("payout", filter=Q(reversed_at__gte=at)),
            settled=Count("id", filter=Q(settled_at__gte=at, reversed_at__isnull=True)),
            paid=Sum("payout", filter=Q(settled_at__gte=at, reversed_at__isnull=True)),
        )
        said = []
        if rows["reversed"]:
            said.append(
                f"reversed {_plural(rows['reversed'], 'settlement')}, "
                f"took back {_money(rows['taken_back'])}"
            )
        if rows["settled"]:
            said.append(
                f"settled {_plural(rows['settled'], 'position')}, paid {_money(rows['paid'])}"
            )
        if said:
            said.append("scores are being recomputed")
        return ", ".join(said)
