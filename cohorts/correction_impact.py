"""What a staff correction of a market's resolution does to the books, in words for the admin:
before (on the confirmation page) from the live settlements and open positions, after (in the
result message) from the settlement rows the correction wrote. Registered with
markets.admin.IMPACT, since only this floor knows positions and settlements."""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Count, Q, Sum

from cohorts.models import Position, Settlement
from markets.models import Market, ResolutionChange


def _money(amount: Decimal | None) -> str:
    return f"${amount or Decimal(0):,.2f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class SettlementImpact:
    def preview(self, markets: list[Market]) -> dict[int, str]:
        ids = [m.pk for m in markets]
        live = {
            row["market_id"]: row
            for row in Settlement.objects.filter(market_id__in=ids, reversed_at__isnull=True)
            .values("market_id")
            .annotate(
                n=Count("id"), paid=Sum("payout"), entries=Count("position__entry", distinct=True)
            )
        }
        open_ = {
            row["market_id"]: row
            for row in Position.objects.filter(market_id__in=ids, status=Position.Status.OPEN)
            .values("market_id")
            .annotate(n=Count("id"), entries=Count("entry", distinct=True))
        }
        out = {}
        for pk in ids:
            said = []
            if pk in live:
                row = live[pk]
                said.append(
                    f"will reverse {_plural(row['n'], 'settlement')} of "
                    f"{row['entries']} entr{'y' if row['entries'] == 1 else 'ies'}, "
                    f"taking back {_money(row['paid'])} paid out"
                )
            if pk in open_:
                said.append(f"{_plural(open_[pk]['n'], 'open position')} will be settled")
            if not said:
                said.append("no position holds this market: only its record changes")
            out[pk] = "Impact: " + "; ".join(said) + "."
        return out

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
