"""What a staff correction would do to the leaderboards, read inside its dry run
(markets.corrections.preview_resolution): each scope holding the markets is scored on the data
as it stands and again on the corrected data (score_unsaved: nothing stored), and each group's
ranks, headline scores and P/L are compared. Registered with markets.admin.PREVIEW.

Bounded in time: a scope whose last run, or whose first dry run, shows that the second would
not finish within the preview's deadline is left out with the reason; the settlements section
still shows what the correction pays and takes back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.urls import reverse

from agents.models import Competitor
from cohorts.models import Cohort, Forecast, Position
from markets.models import Market
from scoring.models import LeaderboardRow, ScoreRun
from scoring.present import ALL
from scoring.services import scope_clock, score_unsaved

HEADLINE_FIELD = {"brier_skill_vs_market": "skill_vs_market", "return_pct": "return_pct"}
HEADLINE_LABEL = {"brier_skill_vs_market": "Brier skill vs market", "return_pct": "return %"}


@dataclass(frozen=True)
class RankLine:
    competitor: str
    rank_before: int | None
    rank_after: int | None
    headline_before: float | None
    headline_after: float | None
    pnl_before: Decimal
    pnl_after: Decimal

    @property
    def moved(self) -> bool:
        return (self.rank_before, self.headline_before, self.pnl_before) != (
            self.rank_after,
            self.headline_after,
            self.pnl_after,
        )


@dataclass(frozen=True)
class Board:
    scope: str
    group: str  # "all cohorts" or the cohort's name
    headline: str
    lines: list[RankLine]


@dataclass
class ScoreSection:
    template = "admin/scoring/correction_preview_scores.html"
    boards: list[Board] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # per scope, why it was not dry-run


@dataclass
class _Before:
    runs: dict[str, tuple[list[LeaderboardRow], dict[str, str], float]] = field(
        default_factory=dict
    )
    skipped: list[str] = field(default_factory=list)


def _scopes(markets: list[Market]) -> list[str]:
    kinds = set(
        Forecast.objects.filter(market__in=markets).values_list("entry__cohort__kind", flat=True)
    ) | set(
        Position.objects.filter(market__in=markets).values_list("entry__cohort__kind", flat=True)
    )
    return sorted(k for k in kinds if k in ScoreRun.Scope.values)


def _last_duration(scope: str) -> float | None:
    run = (
        ScoreRun.objects.filter(scope=scope, status=ScoreRun.Status.DONE, finished_at__isnull=False)
        .order_by("-finished_at")
        .first()
    )
    if run is None or run.finished_at is None:
        return None
    took = run.finished_at - run.started_at
    # A run stamped on a simulated clock says nothing about the machine's time.
    return took.total_seconds() if timedelta(0) <= took <= timedelta(hours=1) else None


class ScorePreview:
    """markets.corrections.PreviewReader for the leaderboards."""

    def before(self, markets: list[Market], deadline: float) -> _Before:
        out = _Before()
        for scope in _scopes(markets):
            left = deadline - time.monotonic()
            last = _last_duration(scope)
            if last is not None and 2 * last > left:
                out.skipped.append(
                    f"{scope}: its last score run took {last:.1f} s; scoring it twice would not "
                    f"finish within the preview's {max(left, 0):.1f} s left"
                )
                continue
            start = time.monotonic()
            rows, headlines = score_unsaved(scope, scope_clock(scope))
            out.runs[scope] = (rows, headlines, time.monotonic() - start)
        return out

    def after(self, markets: list[Market], before: _Before, deadline: float) -> ScoreSection:
        section = ScoreSection(skipped=list(before.skipped))
        groups = {str(pk) for pk in Cohort.objects.filter(entries__positions__market__in=markets)
                  .values_list("pk", flat=True)}  # fmt: skip
        for scope, (rows_before, headlines, took) in before.runs.items():
            left = deadline - time.monotonic()
            if took > left:
                section.skipped.append(
                    f"{scope}: a dry run of its scores takes {took:.1f} s, more than the "
                    f"preview's {max(left, 0):.1f} s left"
                )
                continue
            rows_after, headlines_after = score_unsaved(scope, scope_clock(scope))
            section.boards += _boards(
                scope, rows_before, rows_after, headlines_after or headlines, groups
            )
        return section


def _key(row: LeaderboardRow) -> str:
    return ALL if row.cohort_id is None else str(row.cohort_id)


def _boards(
    scope: str,
    before: list[LeaderboardRow],
    after: list[LeaderboardRow],
    headlines: dict[str, str],
    groups: set[str],
) -> list[Board]:
    names = dict(Competitor.objects.values_list("pk", "display_name"))
    cohorts = {str(c.pk): str(c) for c in Cohort.objects.filter(pk__in=[g for g in groups])}
    boards = []
    for group in [ALL, *sorted(groups)]:
        old = {r.competitor_id: r for r in before if _key(r) == group}
        new = {r.competitor_id: r for r in after if _key(r) == group}
        if not old and not new:
            continue
        metric = headlines.get(group, "return_pct")
        attr = HEADLINE_FIELD.get(metric, "return_pct")
        lines = [
            RankLine(
                competitor=names.get(pk, str(pk)),
                rank_before=getattr(old.get(pk), "rank", None),
                rank_after=getattr(new.get(pk), "rank", None),
                headline_before=getattr(old.get(pk), attr, None),
                headline_after=getattr(new.get(pk), attr, None),
                pnl_before=getattr(old.get(pk), "pnl", Decimal(0)),
                pnl_after=getattr(new.get(pk), "pnl", Decimal(0)),
            )
            for pk in set(old) | set(new)
        ]
        lines.sort(key=lambda line: (line.rank_after or 10**6, line.competitor))
        boards.append(
            Board(
                scope=scope,
                group="all cohorts" if group == ALL else cohorts.get(group, group),
                headline=HEADLINE_LABEL.get(metric, metric),
                lines=lines,
            )
        )
    return boards


class ScoreRunFollowUp:
    """markets.correction_views.FollowUp: the rescore a correction asks for, once every scope
    holding the markets has a finished run newer than the correction."""

    def mark(self) -> str:
        return str(ScoreRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0)

    def landed(self, markets: list[Market], mark: str) -> list[tuple[str, str]]:
        if not mark.isdigit():
            raise ValueError(f"not a score run mark: {mark[:20]!r}")
        scopes = _scopes(markets)
        newest = {}
        for run in ScoreRun.objects.filter(
            scope__in=scopes, status=ScoreRun.Status.DONE, pk__gt=int(mark)
        ).order_by("pk"):
            newest[run.scope] = run
        if not scopes or set(newest) != set(scopes):
            return []
        return [
            (f"{scope} score run #{newest[scope].pk}",
             reverse("admin:scoring_scorerun_change", args=[newest[scope].pk]))
            for scope in scopes
        ]  # fmt: skip
