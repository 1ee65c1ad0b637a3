"""Reactions of the competition engine to what lower packages announce. Dispatch only."""

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from cohorts import seals, series, settlement
from cohorts.models import Entry
from markets.models import Market, ResolutionChange
from markets.signals import market_resolved


@receiver(market_resolved, sender=Market, dispatch_uid="cohorts.settle_on_resolution")
def settle_on_resolution(sender, market, **kwargs):
    return settlement.settle_resolved(market)


@receiver(post_save, sender=ResolutionChange, dispatch_uid="cohorts.log_resolution_change")
def log_resolution_change(sender, instance, created, **kwargs):
    if created:
        seals.log_events(market_id=instance.market_id)


@receiver(post_delete, sender=Entry, dispatch_uid="cohorts.series_on_entry_delete")
def forget_entry_series(sender, instance, **kwargs):
    series.entry_deleted(instance.competitor_id)
