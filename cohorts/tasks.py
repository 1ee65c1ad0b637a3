"""Celery tasks of the competition engine: thin wrappers over the services.

The decision tasks (`decide`, `run_decision`) live with the decision run in
cohorts/decisions/tasks.py, under these modules' task names; importing them here registers them
with Celery's autodiscovery, which looks for `cohorts.tasks`.

Each is safe to run twice at once (the services claim their work with unique constraints,
row locks or conditional UPDATEs) and retries transient database errors with backoff.
"""

from __future__ import annotations

from datetime import date

from celery import shared_task
from django.db import OperationalError

from cohorts import holdings, services, settlement, snapshots
from cohorts.decisions.tasks import decide, enqueue_decisions, run_decision
from cohorts.seals import sealing as seals
from core import clock
from core.jobs import job_run
from markets.models import Market

RETRY = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
}


@shared_task(**RETRY)
def open_cohort(week_start: str | None = None) -> int:
    """Open this week's live cohort (beat: Sunday 00:00 UTC), or the week of the given Sunday
    (YYYY-MM-DD). Returns the cohort id."""
    with job_run("open_cohort") as summary:
        week = None if week_start is None else date.fromisoformat(week_start)
        cohort, created = services.open_cohort(week, refuse_empty=True)
        summary.update(cohort=cohort.pk, created=created)
    return cohort.pk


@shared_task(**RETRY)
def snapshot() -> int:
    """Every 10 minutes: settle what lags, snapshot the running live cohorts, advance them,
    and catch up on sealing (weeks past their grace period, amendments, the event log, publishing).

    Settling first means the snapshot never values a resolved market twice (as a position
    and as a payout) and heals a settlement that the resolve job failed to run.
    """
    with job_run("snapshot") as summary:
        at = clock.now()
        summary["settle"] = settlement.settle_pending(at)
        summary["snapshots"] = snapshots.take_snapshot(at)
        summary["cohorts"] = services.advance_cohorts(at)
        summary["seals"] = seals.upkeep(at)
    return summary["snapshots"]


@shared_task(**RETRY)
def settle_pending() -> dict:
    """Settle every market whose settlements lag its status."""
    with job_run("settle") as summary:
        summary.update(settlement.settle_pending())
    return summary


@shared_task(**RETRY)
def settle(market_id: int | None = None) -> dict:
    """Settle one market (enqueued after a resolution change), or all pending when no id."""
    if market_id is None:
        return settle_pending()
    with job_run("settle") as summary:
        report = settlement.settle_market(Market(pk=market_id))
        summary.update(
            market=market_id,
            settled=report.settled,
            reversed=report.reversed,
            paid=str(report.paid),
        )
    return summary


@shared_task(name="cohorts.tasks.backfill_held_markets", **RETRY)
def backfill_held_markets() -> dict:
    """Daily: fill holes a sync outage left in the price history of held markets."""
    with job_run("backfill") as summary:
        summary.update(holdings.backfill_held_markets())
        return summary


__all__ = ["decide", "enqueue_decisions", "run_decision"]
