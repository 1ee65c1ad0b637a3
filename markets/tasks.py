"""Celery tasks for the markets app: thin wrappers over markets.services.

Both are on the beat schedule (arena/celery.py) and safe to run twice at once: syncs upsert,
resolutions are recorded by a conditional UPDATE.
"""

from dataclasses import asdict

from celery import shared_task
from django.db import OperationalError

from core.jobs import job_run
from markets import services
from markets.gamma import GammaBadResponse, GammaUnavailable
from markets.models import Market

# Worth another try later: Gamma down or throttling after the client's own retries, a garbled
# body, or a busy database. A 4xx from Gamma (our request is wrong) is not retried.
TRANSIENT = (GammaUnavailable, GammaBadResponse, OperationalError)
RETRY = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": 60,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 3,
}


@shared_task(name="markets.tasks.sync_markets", **RETRY)
def sync_markets(limit: int | None = None) -> dict:
    with job_run("sync") as summary:  # /healthz reports when this last succeeded
        report = services.sync_markets(limit=limit)
        summary.update(asdict(report))
        if report.fetched and not report.price_points:
            # Every quote refused or every market unreadable: prices are as stale as if Gamma
            # were down, so this run must not count as a successful sync on /healthz.
            raise GammaBadResponse(f"no usable price among {report.fetched} markets fetched")
    return summary


@shared_task(name="markets.tasks.resolve_markets", **RETRY)
def resolve_markets() -> dict:
    with job_run("resolve") as summary:
        summary.update(asdict(services.resolve_markets()))
    return summary


@shared_task(name="markets.tasks.backfill_price_history", **RETRY)
def backfill_price_history(market_id: int, days: int = 30) -> int:
    return services.backfill_price_history(Market.objects.get(pk=market_id), days=days)
