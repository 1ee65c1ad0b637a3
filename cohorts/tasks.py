"""Celery tasks of the competition engine: thin wrappers over the services.

`decide` is the beat entry for decisions (a 15-minute catch-up from Sunday 00:05 UTC): it freezes
the universes and enqueues one `run_decision` per pending entry, so entries run in parallel on the
workers; each decision is claimed through its unique Decision row.

Each is safe to run twice at once (the services claim their work with unique constraints,
row locks or conditional UPDATEs) and retries transient database errors with backoff.
"""

from __future__ import annotations

from datetime import date, datetime
from functools import partial

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from cohorts import decisions, holdings, seals, services, settlement, snapshots
from cohorts.models import Decision
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
# A decision also retries a dropped connection (the worker's DB link can die mid-call).
DECIDE_RETRY = {**RETRY, "autoretry_for": (OperationalError, InterfaceError)}


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


@shared_task(name="cohorts.tasks.decide", **DECIDE_RETRY)
def decide(cohort_id: int | None = None, week: int | None = None) -> int:
    """Enqueue this week's decisions for every decision-eligible live cohort."""
    with job_run("decide") as summary:
        refused: list[dict] = []
        count = decisions.decide(
            cohort=cohort_id, week=week, enqueue=enqueue_decisions, refused=refused
        )
        summary["entries"] = count
        if refused:
            summary["refused"] = refused
    return count


# acks_late: a worker that dies mid-decision leaves the message to be redelivered.
@shared_task(name="cohorts.tasks.run_decision", bind=True, acks_late=True, **DECIDE_RETRY)
def run_decision(self, entry_id: int, week: int, at: str | None = None) -> str:
    when = datetime.fromisoformat(at) if at else None
    decision = decisions.run_decision(entry_id, week, when)
    if decision.status == Decision.Status.CLAIMED:
        # Another runner holds the claim. Look again once it would be stale: if that runner
        # died, this retry takes the decision over; if it finished, the retry is a no-op.
        raise self.retry(countdown=settings.ARENA_CLAIM_TIMEOUT_SECONDS + 60, max_retries=3)
    return decision.status


def enqueue_decisions(entry_ids: list[int], week: int, at: datetime | None) -> None:
    """One run_decision message per entry, sent after commit: a worker must never look for rows
    this transaction has not committed."""
    at_text = at.isoformat() if at is not None else None
    for entry_id in entry_ids:
        transaction.on_commit(partial(run_decision.delay, entry_id, week, at_text))
