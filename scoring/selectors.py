"""Reads of materialised scores. Pages and the API use these, never the scoring math."""

from __future__ import annotations

from django.db.models import QuerySet

from scoring.models import LeaderboardRow, ScoreRun


def done_runs(scope: str = ScoreRun.Scope.LIVE) -> QuerySet[ScoreRun]:
    """A scope's finished DONE runs, the latest first; running and failed runs are never served."""
    return ScoreRun.objects.filter(scope=scope, status=ScoreRun.Status.DONE).order_by(
        "-finished_at", "-pk"
    )


def latest_run(scope: str = ScoreRun.Scope.LIVE) -> ScoreRun | None:
    return done_runs(scope).first()


def leaderboard_rows(run: ScoreRun, cohort=None) -> QuerySet[LeaderboardRow]:
    """Rows of one leaderboard in rank order: a cohort's (pk or Cohort) or, with None, all cohorts."""
    rows = run.rows.select_related("competitor")
    rows = rows.filter(cohort__isnull=True) if cohort is None else rows.filter(cohort=cohort)
    return rows.order_by("rank", "competitor__display_name")
