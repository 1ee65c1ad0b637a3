"""`arena decide` (dispatched by the arena command)."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import CommandError

from cohorts import decisions
from cohorts.models import Cohort, Decision
from cohorts.tasks import enqueue_decisions
from core import clock


def decide_arguments(parser) -> None:
    parser.add_argument(
        "--cohort", type=int, help="cohort id (default: every eligible live cohort)"
    )
    parser.add_argument("--week", type=int, help="1-based cohort week (default: the current one)")
    parser.add_argument(
        "--sync", action="store_true", help="run the decisions here instead of on the workers"
    )


def decide(cmd, options) -> None:
    cohort_id, week = options.get("cohort"), options.get("week")
    if cohort_id is not None and not Cohort.objects.filter(pk=cohort_id).exists():
        raise CommandError(f"no cohort with id {cohort_id}")
    if week is not None and week < 1:
        raise CommandError("--week must be 1 or more")
    if week is not None and cohort_id is None:
        raise CommandError("--week needs --cohort (weeks are counted per cohort)")
    started = clock.now()
    count = decisions.decide(
        cohort=cohort_id, week=week, sync=options.get("sync", False), enqueue=enqueue_decisions
    )
    if count == 0:
        cmd.stdout.write("no entries to decide (no decision-eligible cohort this week)")
    elif options.get("sync"):
        cmd.stdout.write(f"decided {count} entries: {_status_summary(started)}")
    else:
        cmd.stdout.write(f"queued {count} decisions for the Celery workers")


def _status_summary(started) -> str:
    # Decisions claimed by this run (entries decided earlier keep their old claim time).
    qs = Decision.objects.filter(claimed_at__gte=started)
    counts = Counter(qs.values_list("status", flat=True))
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"
