"""The decision tasks: thin wrappers over cohorts/decisions/run.py, named as cohorts.tasks' are
(beat's schedule and the workers know them by these names; cohorts.tasks imports this module so
Celery's autodiscovery registers them).

`decide` is the beat entry for decisions (a 15-minute catch-up from Sunday 00:05 UTC): it freezes
the universes and enqueues one `run_decision` per pending entry, so entries run in parallel on the
workers; each decision is claimed through its unique Decision row. Both are safe to run twice at
once and retry transient database errors with backoff.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from cohorts.decisions import run as decisions
from cohorts.decisions.claims import runner_name
from cohorts.models import Decision
from core import logcontext
from core.jobs import job_run

# A decision also retries a dropped connection (the worker's DB link can die mid-call).
DECIDE_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
}


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
    runner = runner_name(self.request.hostname or "")
    with logcontext.bound(task=self.request.id, worker=runner):
        decision = decisions.run_decision(entry_id, week, when, runner=runner)
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
