"""Reads of materialised scores. Pages and the API use these, never the scoring math."""

from __future__ import annotations

from django.db.models import F, QuerySet

from agents.models import Competitor
from scoring.models import LeaderboardRow, ScoreRun


def latest_run(scope: str = ScoreRun.Scope.LIVE) -> ScoreRun | None:
    """The most recently finished DONE run of a scope; running and failed runs are never served."""
    return (
        ScoreRun.objects.filter(scope=scope, status=ScoreRun.Status.DONE)
        .order_by("-finished_at", "-pk")
        .first()
    )


def leaderboard_rows(run: ScoreRun, cohort=None) -> QuerySet[LeaderboardRow]:
    """Rows of one leaderboard in rank order: a cohort's (pk or Cohort) or, with None, all cohorts."""
    rows = run.rows.select_related("competitor")
    rows = rows.filter(cohort__isnull=True) if cohort is None else rows.filter(cohort=cohort)
    return rows.order_by("rank", "competitor__display_name")


def competitor_rows(competitor: Competitor, scope: str = ScoreRun.Scope.LIVE) -> QuerySet:
    """A competitor's rows in the latest run of a scope: the all-cohorts row first, then by cohort."""
    run = latest_run(scope)
    if run is None:
        return LeaderboardRow.objects.none()
    return (
        run.rows.filter(competitor=competitor)
        .select_related("cohort", "competitor")
        .order_by(F("cohort__week_start").desc(nulls_first=True), "cohort_id")
    )
