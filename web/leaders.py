"""Who leads, for the list pages: each cohort's leader and margin (the cohorts page) and each
competitor's rank and headline figure (the competitors page), read from the leaderboard rows
the latest score runs stored and ordered by web/standings.py as the leaderboard is.
"""

from __future__ import annotations

from django.db.models import OuterRef, Subquery

from cohorts.models import Cohort
from scoring import selectors as scoring_selectors
from scoring.models import LeaderboardRow, ScoreRun
from scoring.stored import RunDetails
from web import standings
from web.selectors import SCOPES
from web.standings import table_rows

NO_DETAILS = RunDetails()  # a board its run did not score


def _latest_runs(scopes) -> dict[str, ScoreRun]:
    """The latest run of each scope, without its details: each board reads its own slice
    (scoring.selectors.board_details), not every group's tests. One query for all the scopes
    (each run kept only when it is its scope's latest): a query per scope cost the competitors
    page four, about a fifth of its cold render."""
    # done_runs' own order decides "latest", against each candidate's scope.
    latest = scoring_selectors.done_runs(OuterRef("scope")).values("pk")[:1]  # type: ignore[arg-type]
    rows = (
        ScoreRun.objects.filter(scope__in=list(scopes), status=ScoreRun.Status.DONE)
        .filter(pk=Subquery(latest))
        .defer("details")
    )
    return {run.scope: run for run in rows}


def cohort_leaders(cohorts: list[Cohort]) -> dict[int, dict]:
    """Per cohort: its leader in the latest score run of its kind and the margin over the
    runner-up in the headline metric, with whether the paired test separates them."""
    runs = _latest_runs({c.kind for c in cohorts})
    if not runs or not cohorts:
        return {}
    # Without each row's own details (about 1 kB of JSON a row, 12 rows a cohort): a board
    # reads its letters from the slice below, and a leader is named from the row's columns.
    rows = (
        LeaderboardRow.objects.filter(run__in=runs.values(), cohort__in=cohorts)
        .select_related("competitor")
        .defer("details")
        .order_by("cohort_id", "rank", "pk")
    )
    by_cohort: dict[int, list[LeaderboardRow]] = {}
    for r in rows:
        by_cohort.setdefault(r.cohort_id, []).append(r)
    slices = scoring_selectors.board_details(
        (run.pk for run in runs.values()), (c.pk for c in cohorts), all_cohorts=False
    )
    out = {}
    for c in cohorts:
        run = runs.get(c.kind)
        ranked = by_cohort.get(c.pk) or []
        if run is None or not ranked:
            continue
        details = slices.get((run.pk, c.pk), NO_DETAILS)
        board = standings.build(run, ranked, group=str(c.pk), details=details)
        scored = sorted(board.scored, key=lambda s: s.rank)
        if not scored:
            continue
        field_name = standings.HEADLINES[board.headline][0]
        leader = scored[0]
        info = {"leader": leader.row.competitor, "label": board.headline_label, "margin": None}
        if len(scored) > 1:
            a, b = getattr(leader.row, field_name), getattr(scored[1].row, field_name)
            info["margin"] = a - b
            info["runner_up"] = scored[1].row.competitor
            info["tied"] = board.grouped and standings.share_a_letter(leader, scored[1])
            info["places"] = standings.places_to_separate([a, b], [a - b], 3)
        info["headline"] = board.headline
        out[c.pk] = info
    return out


def competitor_headlines(competitors) -> dict[int, dict]:
    """Per competitor: rank and headline figure of its all-cohorts row in the latest run of the
    first scope (live, replay, demo) where it has one."""
    runs = _latest_runs(SCOPES)
    if not runs:
        return {}
    all_cohorts = LeaderboardRow.objects.filter(run__in=runs.values(), cohort__isnull=True)
    rows = list(all_cohorts.select_related("competitor"))
    slices = scoring_selectors.board_details((run.pk for run in runs.values()), ())
    by_run: dict[int, list[LeaderboardRow]] = {}
    for r in rows:
        by_run.setdefault(r.run_id, []).append(r)
    out: dict[int, dict] = {}
    for scope in SCOPES:
        run = runs.get(scope)
        if run is None:
            continue
        details = slices.get((run.pk, None), NO_DETAILS)
        board = standings.build(run, by_run.get(run.pk, []), details=details)
        field_name = standings.HEADLINES[board.headline][0]
        for s in board.scored + board.unscored:
            cid = s.row.competitor_id
            if cid in out:
                continue
            out[cid] = {
                "scope": scope,
                "rank": s.rank,
                "of": len(board.scored),
                "value": getattr(s.row, field_name),
                "headline": board.headline,
                "label": board.headline_label,
                "places": board.places.get(
                    "skill" if field_name == "skill_vs_market" else "return"
                ),
                "reason": s.reason,
                "provisional": s.row.provisional,
                "letters": s.letters,
            }
    return out


def cohort_board(
    cohort: Cohort,
    run: ScoreRun | None = None,
    rows: list[LeaderboardRow] | None = None,
    details: RunDetails | None = None,
) -> tuple[ScoreRun, standings.Board] | None:
    """The cohort's own leaderboard in the latest score run of its kind (`run`, and its rows
    for the cohort in rank order and its details, when the caller has them), ranked, lettered
    and with digits chosen as on the home page; None before that run has scored the cohort.
    Ranked by the run's headline order, the same order that names the leader on the cohorts
    page."""
    if run is None:
        run = scoring_selectors.done_runs(cohort.kind).defer("details").first()
    if run is None:
        return None
    if rows is None:
        rows = list(table_rows(scoring_selectors.leaderboard_rows(run, cohort)))
    if not rows:
        return None
    if details is None:
        details = scoring_selectors.group_details(run, str(cohort.pk))
    return run, standings.build(run, rows, group=str(cohort.pk), details=details)
