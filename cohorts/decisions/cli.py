"""`arena decide` (dispatched by the arena command)."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import CommandError

from cohorts.decisions import run as decisions
from cohorts.decisions.tasks import enqueue_decisions
from cohorts.models import Cohort, Decision
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
    refused: list[dict] = []
    count = decisions.decide(
        cohort=cohort_id,
        week=week,
        sync=options.get("sync", False),
        enqueue=enqueue_decisions,
        refused=refused,
    )
    failed = 0
    if count == 0:
        if not refused:
            cmd.stdout.write("no entries to decide (no decision-eligible cohort this week)")
    elif not options.get("sync"):
        cmd.stdout.write(f"queued {count} decisions for the Celery workers")
    else:
        ran = list(
            Decision.objects.filter(claimed_at__gte=started)
            .select_related("entry__competitor", "entry__cohort")
            .order_by("entry__cohort_id", "week", "entry__competitor__slug", "entry_id")
        )
        cmd.stdout.write(f"decided {count} entries: {_status_summary(ran)}")
        for line in _not_done_lines(ran):
            cmd.stdout.write(line)
        failed = sum(d.status == Decision.Status.FAILED for d in ran)
        retryable = sum(d.status == Decision.Status.RETRYABLE for d in ran)
        if retryable:
            # A provider outage is not the run's failure: the catch-up decides them later.
            many = retryable != 1
            cmd.stdout.write(
                f"{retryable} decision{'s' if many else ''} retryable after a provider outage, "
                f"not counted as failed: beat's decide catch-up runs {'them' if many else 'it'} "
                "again after the retry time listed"
            )
    for r in refused:
        cmd.stdout.write(f"refused: cohort={r['cohort']} week={r['week']} reason={r['reason']}")
    problems = []
    if failed:
        problems.append(f"{failed} decision{'s' if failed != 1 else ''} failed")
    if refused:
        n = len(refused)
        problems.append(f"{n} cohort week{'s' if n != 1 else ''} refused")
    if problems:
        raise CommandError(f"{' and '.join(problems)} (listed above)")


# Failures first, then what runs again later, then the rest (skips).
ORDER: dict[str, int] = {Decision.Status.FAILED: 0, Decision.Status.RETRYABLE: 1}


def _status_summary(ran: list[Decision]) -> str:
    # Decisions claimed by this run (entries decided earlier keep their old claim time).
    counts = Counter(d.status for d in ran)
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"


def _not_done_lines(ran: list[Decision]) -> list[str]:
    """One line per decision that did not end as done: who, where, and why, so an operator sees
    a 404 for an unknown model id or a missing key without opening the admin."""
    lines = []
    not_done = [d for d in ran if d.status != Decision.Status.DONE]
    for d in sorted(not_done, key=lambda d: ORDER.get(d.status, len(ORDER))):
        reason = " ".join((d.error or d.hold_reason or "no reason recorded").split())[:300]
        retry = ""
        if d.status == Decision.Status.RETRYABLE and d.retry_after is not None:
            retry = f"rounds={d.retry_rounds} retry_after={d.retry_after.isoformat()} "
        lines.append(
            f"{d.status}: cohort={d.entry.cohort_id} week={d.week} "
            f"competitor={d.entry.competitor.slug} decision={d.pk} {retry}reason={reason}"
        )
    return lines
