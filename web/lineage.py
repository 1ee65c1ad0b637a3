"""What pages and the API say about releases: the exact model a decision called, and which
cohorts each of a competitor's releases ran in."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from agents.models import Competitor, Release
from cohorts.models import Cohort, Entry

# Where a simulated competitor that names no endpoint is answered: the simulated endpoint a
# simulation serves in its own process on loopback (agents/simulated.py), never the default
# provider, whatever the blank base URL would mean for a real model.
IN_PROCESS_SIMULATED = "127.0.0.1 (simulated endpoint, in process)"


def endpoint_host(base_url: str, simulated: bool = False) -> str:
    """The host (and port) a release called; the default endpoint's when it names none (for a
    simulated competitor, the in-process simulated endpoint). Only the host: a URL's user, path
    and query are not for public pages."""
    if simulated and not base_url:
        return IN_PROCESS_SIMULATED
    parts = urlsplit(base_url or settings.ARENA_LLM_BASE_URL)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or ""
    return f"{host}:{port}" if port else host


@dataclass
class ReleaseView:
    number: int
    model_id: str
    provider: str
    host: str
    created_at: datetime
    cohorts: list[Cohort] = field(default_factory=list)


def release_view(release: Release, competitor: Competitor) -> ReleaseView:
    return ReleaseView(
        release.number,
        release.model_id,
        release.provider,
        endpoint_host(release.base_url, competitor.simulated),
        release.created_at,
    )


def release_dict(release: Release | None, competitor: Competitor) -> dict[str, Any] | None:
    """A decision's release as the API gives it (null for a decision that names none)."""
    if release is None:
        return None
    return {
        "number": release.number,
        "model_id": release.model_id,
        "provider": release.provider,
        "endpoint": release.base_url,
        "endpoint_host": endpoint_host(release.base_url, competitor.simulated),
        "knowledge_cutoff": release.knowledge_cutoff.isoformat()
        if release.knowledge_cutoff
        else None,
    }


def competitor_releases(competitor: Competitor) -> list[ReleaseView]:
    """Every release, newest first, each with the cohorts whose entries ran it (two queries).

    A release is dated no later than the first cohort that ran it: a simulation's cohorts run
    on their own clock, often before the release row was written on the machine's."""
    views = {r.pk: release_view(r, competitor) for r in competitor.releases.order_by("-number")}
    seen: set[tuple[int, int]] = set()
    used = (
        Entry.objects.filter(release_id__in=views)
        .select_related("cohort")
        .order_by("cohort__week_start", "cohort_id")
    )
    for entry in used:
        assert entry.release_id is not None  # filtered on it above
        if (entry.release_id, entry.cohort_id) not in seen:
            seen.add((entry.release_id, entry.cohort_id))
            view = views[entry.release_id]
            view.cohorts.append(entry.cohort)
            view.created_at = min(view.created_at, entry.cohort.week_start)
    return list(views.values())
