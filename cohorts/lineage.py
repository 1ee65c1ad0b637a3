"""Which release an entry runs: the one it was pinned to when its cohort opened.

An entry made outside open_cohort (a test's or a tool's own rows) has none yet; its first
decision pins the competitor's current release, once (a conditional update: two runners of the
same entry pin the same release).
"""

from __future__ import annotations

from agents.models import Release
from cohorts.models import Entry


def pinned_release(entry: Entry) -> Release:
    if entry.release_id is None:
        release = Release.current(entry.competitor)
        Entry.objects.filter(pk=entry.pk, release__isnull=True).update(release=release)
        entry.refresh_from_db(fields=["release"])
    pinned = entry.release
    assert pinned is not None  # pinned just above
    return pinned
