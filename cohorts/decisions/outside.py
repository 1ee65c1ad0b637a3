"""Outside agents' weeks: when their submissions are accepted, and what a week without one is.

An outside agent (agents.models.Competitor.Kind.OUTSIDE) is never called: it submits through the
agent API (cohorts/decisions/submissions.py) from the moment its week's universe froze until the
deadline, a frozen methodology constant equal to the frozen-price window, so it trades at the
prices every model traded at. Until then the weekly run leaves its entry alone; after it, the
run records the week as HOLD "no submission" (cohorts/decisions/run.py), and the week can seal.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agents.models import Competitor
from cohorts.models import Entry, Universe
from core.methodology import CONSTANTS

NO_SUBMISSION = "no submission"
# A run that reached an outside entry inside its window leaves the claim to the agent's own
# submission (a skipped decision is reclaimable, cohorts/decisions/claims.py).
STILL_OPEN = "an outside agent: it submits itself until its deadline"
WINDOW = timedelta(minutes=CONSTANTS.outside_submission_window_minutes)


def deadline(universe: Universe) -> datetime:
    return universe.frozen_at + WINDOW


def still_open(entry_ids: list[int], universe: Universe, at: datetime) -> set[int]:
    """The outside entries among `entry_ids` whose submission window is still open at `at`."""
    if at >= deadline(universe):
        return set()
    return set(
        Entry.objects.filter(pk__in=entry_ids, competitor__kind=Competitor.Kind.OUTSIDE)
        .values_list("pk", flat=True)
    )
