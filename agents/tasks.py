"""Celery tasks for decisions: thin wrappers over agents.decisions.

`decide` is the beat entry (Sunday 00:05 UTC): it freezes the universes and enqueues one
`run_decision` per entry, so entries run in parallel on the workers. Both are safe to run twice
at once: each decision is claimed through its unique Decision row.
"""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from agents import decisions
from agents.models import Decision
from arena.jobs import job_run

RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
}


@shared_task(**RETRY)
def decide(cohort_id: int | None = None, week: int | None = None) -> int:
    """Enqueue this week's decisions for every decision-eligible live cohort."""
    with job_run("decide") as summary:
        count = decisions.decide(cohort=cohort_id, week=week)
        summary["entries"] = count
    return count


# acks_late: a worker that dies mid-decision leaves the message to be redelivered.
@shared_task(bind=True, acks_late=True, **RETRY)
def run_decision(self, entry_id: int, week: int, at: str | None = None) -> str:
    when = datetime.fromisoformat(at) if at else None
    decision = decisions.run_decision(entry_id, week, when)
    if decision.status == Decision.Status.CLAIMED:
        # Another runner holds the claim. Look again once it would be stale: if that runner
        # died, this retry takes the decision over; if it finished, the retry is a no-op.
        raise self.retry(countdown=settings.ARENA_CLAIM_TIMEOUT_SECONDS + 60, max_retries=3)
    return decision.status
