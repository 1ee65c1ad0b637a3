"""Reactions of the competition engine to what lower packages announce. Dispatch only."""

from django.dispatch import receiver

from cohorts import settlement
from markets.models import Market
from markets.signals import market_resolved


@receiver(market_resolved, sender=Market, dispatch_uid="cohorts.settle_on_resolution")
def settle_on_resolution(sender, market, **kwargs):
    return settlement.settle_resolved(market)
