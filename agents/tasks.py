"""Celery tasks of the agents app: thin wrappers over its services."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from core.jobs import job_run


@shared_task(
    name="agents.tasks.review_lineup",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def review_lineup() -> dict:
    """This week's lineup review (beat: hourly, done once a week; see agents/lineup_review.py)."""
    from agents.lineup_review import review_lineup as review

    with job_run("review_lineup") as summary:
        summary.update(review())
        return summary
