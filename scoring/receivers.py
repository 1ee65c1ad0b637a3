"""Reactions of scoring to what lower packages announce. Dispatch only."""

from django.dispatch import receiver

from markets.models import Market
from markets.signals import resolutions_changed
from scoring.tasks import request_rescore


@receiver(resolutions_changed, sender=Market, dispatch_uid="scoring.rescore_on_resolution")
def rescore_on_resolution(sender, **kwargs):
    request_rescore()
