"""Celery task of the scoring engine: recompute every scope's leaderboard (beat hourly, and
after settlements via request_rescore). Thin: the work is scoring.services.compute_scores.

Two overlapping runs are harmless: each writes its own ScoreRun and readers serve the latest
finished DONE run, so no lock is needed. A crash marks that run FAILED (never served).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache
from django.db import OperationalError, transaction

from cohorts.models import Cohort
from cohorts.scope import other_live_path_kinds
from core.jobs import job_run
from scoring.services import compute_scores

log = logging.getLogger(__name__)


def scopes_with_cohorts() -> list[str]:
    """Scopes (cohort kinds) that have at least one cohort, in a stable order; never the
    live-path scope this deployment does not run (a live site leaves a rehearsal's cohorts
    alone, a rehearsal scores itself instead of live)."""
    kinds = set(Cohort.objects.values_list("kind", flat=True).distinct())
    kinds -= set(other_live_path_kinds())
    return [k for k in Cohort.Kind.values if k in kinds]


class ScoringFailed(Exception):
    """At least one scope failed; the others were still scored (see the job summary)."""


def score_all(summary: dict | None = None) -> dict[str, dict]:
    """Compute every scope that has cohorts; a summary per scope (run id, counts, or error).

    One scope failing (its run is marked FAILED) does not stop the others; ScoringFailed is
    raised at the end so the job is recorded as failed.
    """
    summary = {} if summary is None else summary
    failed = []
    for scope in scopes_with_cohorts():
        try:
            run = compute_scores(scope)
        except Exception as exc:  # recorded here, re-raised as ScoringFailed below
            summary[scope] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            failed.append(scope)
            continue
        summary[scope] = {
            "run": run.pk,
            "rows": run.rows.count(),
            "n_forecasts": run.n_forecasts,
            "n_resolved": run.n_resolved,
        }
    if failed:
        raise ScoringFailed(f"scoring failed for {', '.join(failed)}")
    return summary


@shared_task(
    autoretry_for=(OperationalError,), retry_backoff=True, retry_backoff_max=300, max_retries=3
)
def score() -> dict:
    with job_run("score") as summary:
        score_all(summary)
    return summary


RESCORE_DELAY_S = 60
RESCORE_KEY = "scoring:rescore-pending"


def request_rescore() -> None:
    """Enqueue a rescore once the caller's transaction commits (settlement code calls this).

    Debounced: the first request starts a run RESCORE_DELAY_S later and requests until then
    share it (the run starts after them, so it sees their committed changes). A resolve pass
    that settles 200 markets thus causes one rescore, not 200. cache.add is atomic across
    processes on the shared cache (Redis in production, files on one machine).
    """

    transaction.on_commit(enqueue_rescore)


def enqueue_rescore() -> bool:
    """Queue the debounced rescore now; False (logged) when the broker cannot take it. Called
    after a commit, so an unreachable broker must not turn a staff action into a 500: the hourly
    score run catches up."""
    if not cache.add(RESCORE_KEY, "1", timeout=RESCORE_DELAY_S):
        return True  # one is pending already (or the cache is away: the hourly run covers it)
    try:
        score.apply_async(countdown=RESCORE_DELAY_S, retry=False)
    except Exception as exc:  # kombu's OperationalError and friends: broker unreachable
        cache.delete(RESCORE_KEY)
        log.warning("rescore not queued, broker unreachable (the hourly run will do it): %s", exc)
        return False
    return True
