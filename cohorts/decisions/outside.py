"""Outside agents' weeks: when their submissions are accepted, and what a week without one is.

An outside agent (agents.models.Competitor.Kind.OUTSIDE) is never called: it submits through the
agent API (cohorts/decisions/submissions.py) from the moment its week's universe froze until the
deadline, a frozen methodology constant equal to the frozen-price window, so it trades at the
prices every model traded at. Until then the weekly run leaves its entry alone; after it, the
run records the week as HOLD "no submission" (cohorts/decisions/run.py), and the week can seal.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from agents.models import Competitor
from cohorts.models import Entry, Universe
from core.methodology import CONSTANTS

NO_SUBMISSION = "no submission"
# A run that reached an outside entry inside its window leaves the claim to the agent's own
# submission (a skipped decision is reclaimable, cohorts/decisions/claims.py).
STILL_OPEN = "an outside agent: it submits itself until its deadline"
WINDOW = timedelta(minutes=CONSTANTS.outside_submission_window_minutes)


def window() -> timedelta:
    """The submission window: the methodology's, or in rehearsal scope only the rehearsal's
    ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES (settings refuse it elsewhere; checked here too)."""
    minutes = settings.ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES
    if minutes and settings.ARENA_SCOPE == "rehearsal":
        return timedelta(minutes=minutes)
    return WINDOW


def deadline(universe: Universe) -> datetime:
    return universe.frozen_at + window()


def still_open(entry_ids: list[int], universe: Universe, at: datetime) -> set[int]:
    """The outside entries among `entry_ids` whose submission window is still open at `at`."""
    if at >= deadline(universe):
        return set()
    return set(
        Entry.objects.filter(pk__in=entry_ids, competitor__kind=Competitor.Kind.OUTSIDE)
        .values_list("pk", flat=True)
    )


def awaiting(now: datetime, limit: int = 200) -> list[dict]:
    """Outside entries whose week is open for submissions at `now` and not decided yet, soonest
    deadline first, each with its deadline, the time left and its latest submission (for
    /admin/attention/: information, since the week is recorded as HOLD "no submission" if the
    agent never answers)."""
    from cohorts.models import AgentSubmission, Decision

    open_weeks = Universe.objects.filter(frozen_at__gt=now - window(), frozen_at__lte=now)
    rows = []
    for universe in open_weeks.select_related("cohort").order_by("frozen_at", "pk"):
        decided = Decision.objects.filter(
            entry__cohort=universe.cohort, week=universe.week, status=Decision.Status.DONE
        ).values("entry_id")
        entries = (
            Entry.objects.filter(cohort=universe.cohort, competitor__kind=Competitor.Kind.OUTSIDE)
            .exclude(pk__in=decided)
            .select_related("competitor")
            .order_by("competitor__slug", "replicate")
        )
        for entry in entries:
            latest = (
                AgentSubmission.objects.filter(entry=entry, week=universe.week)
                .order_by("-received_at", "-pk")
                .first()
            )
            ends = deadline(universe)
            rows.append({"entry": entry, "cohort": universe.cohort, "week": universe.week,
                         "deadline": ends, "minutes_left": int((ends - now).total_seconds() // 60),
                         "latest": latest})  # fmt: skip
            if len(rows) >= limit:
                return rows
    return rows
