"""Reactions of the competition engine to what lower packages announce. Dispatch only."""

from django.db.models.signals import post_delete, post_migrate, post_save
from django.dispatch import receiver

from agents.models import Competitor
from cohorts import lineup, settlement, snapshots
from cohorts.models import Cohort, Entry
from cohorts.seals import state as seal_state
from cohorts.series import write as series
from markets.models import Market
from markets.signals import market_resolved, scope_time


@receiver(market_resolved, sender=Market, dispatch_uid="cohorts.after_resolution")
def after_resolution(sender, market, **kwargs):
    return settlement.after_resolution(market)


@receiver(post_delete, sender=Entry, dispatch_uid="cohorts.series_on_entry_delete")
def forget_entry_series(sender, instance, **kwargs):
    series.entry_deleted(instance.competitor_id)


@receiver(post_migrate, dispatch_uid="cohorts.seed_lineup_after_migrate")
def seed_lineup(sender, using="default", stdout=None, verbosity=1, **kwargs):
    if sender.name == "cohorts":  # sent once per app; answer once
        lineup.seed_lineup_after_migrate(using, stdout if verbosity else None)


@receiver(scope_time, sender=Market, dispatch_uid="cohorts.scope_time")
def market_scope_time(sender, market, **kwargs):
    return snapshots.scope_time_of(market)


@receiver(post_save, sender=Competitor, dispatch_uid="cohorts.identity_on_competitor_save")
def record_identity(sender, instance, created, raw=False, **kwargs):
    if not created and not raw:
        seal_state.competitor_changed(instance.pk)


@receiver(post_save, sender=Cohort, dispatch_uid="cohorts.state_on_cohort_save")
def record_cohort_state(sender, instance, created, raw=False, **kwargs):
    if not created and not raw:
        seal_state.cohorts_changed([instance.pk])


@receiver(post_save, sender=Entry, dispatch_uid="cohorts.state_on_entry_save")
def record_entry_state(sender, instance, created, raw=False, **kwargs):
    if not created and not raw:
        seal_state.entry_changed(instance.pk)
