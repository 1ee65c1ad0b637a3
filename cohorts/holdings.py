"""Upkeep of what entries hold: the price history of the markets they have positions in, back-filled
daily so their charts and closing lines have no hole where a sync outage was."""

from django.db.models import QuerySet

from cohorts.models import Position
from markets import services as market_services
from markets.models import Market


def held_markets() -> QuerySet:
    """Markets in which some entry holds an open position."""
    return Market.objects.filter(
        pk__in=Position.objects.filter(status=Position.Status.OPEN).values("market_id")
    )


def backfill_held_markets(*, days: int = 2, client=None) -> dict:
    """Fill holes in the price history of held markets (their charts and closing lines)."""
    return market_services.backfill_markets(held_markets(), days=days, client=client)
