"""Who takes part: the default lineup on a new database, seeded by `manage.py migrate` itself,
the refusal of a week without a competitor, the competitors waiting for the next week.

The documented deploy (and compose's `migrate` service) runs only `migrate`; before this, only
`arena up`, `demo` and `replay` created competitors, so a production arena opened its first
week with no entries. The rule: migrate seeds the default lineup when the competitor table is
empty and no cohort exists yet, i.e. on an arena that has never run a week. Once any cohort
exists the lineup is staff's: a competitor they deleted (even all of them) is never re-created
by a later migrate. ARENA_LINEUP_ON_MIGRATE=0 turns it off (the test suite's empty databases).
"""

from __future__ import annotations

import os

from django.db import DEFAULT_DB_ALIAS

from agents.models import Competitor
from agents.services import ensure_default_lineup
from cohorts.models import Cohort


def seed_lineup_after_migrate(using: str = DEFAULT_DB_ALIAS, stdout=None) -> int:
    """Create the default lineup on a database that never ran a week; the number created."""
    if os.environ.get("ARENA_LINEUP_ON_MIGRATE", "1").strip() == "0":
        return 0
    if using != DEFAULT_DB_ALIAS:
        return 0
    if Cohort.objects.exists() or Competitor.objects.exists():
        return 0
    created = ensure_default_lineup()
    if created and stdout is not None:
        stdout.write(f"  Created the default lineup ({created} competitors)\n")
    return created


class NoCompetitors(ValueError):
    """Opening a cohort would give it no entry."""


def entrants_waiting(cohort: Cohort):
    """Active competitors without an entry in `cohort`: added (or activated) after it opened,
    they take part from the next cohort on."""
    return (
        Competitor.objects.filter(active=True)
        .exclude(pk__in=cohort.entries.values("competitor_id"))
        .order_by("slug")
    )
