"""Reads of materialised scores. Pages and the API use these, never the scoring math."""

from __future__ import annotations

import json
from collections.abc import Iterable

from django.db.models import Func, JSONField, OuterRef, Q, QuerySet, Value

from scoring.models import BoardSlice, LeaderboardRow, ScoreRun
from scoring.stored import DmTables, RunDetails


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


class JsonAt(Func):
    """The JSON value at a path of object keys, every key taken as a key: Django's own key
    transforms read a key of digits (a cohort id) as an array index on SQLite."""

    output_field = JSONField()

    def __init__(self, field: str, *keys: str) -> None:
        super().__init__(field, *(Value(k) for k in keys))
        self.keys = keys

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, function="jsonb_extract_path", **extra)

    def as_sqlite(self, compiler, connection, **extra):
        path = "$" + "".join(f".{json.dumps(k)}" for k in self.keys)
        inner = Func(self.source_expressions[0], Value(path), function="json_extract")
        return inner.as_sql(compiler, connection, **extra)


def details_at(run: ScoreRun, *paths: tuple[str, ...]) -> list[object]:
    """The JSON values at these key paths of a run's details (None where there is none), sliced
    out by the database: the whole of them holds every group's tests and tournament, hundreds
    of kilobytes a page would otherwise parse to read one group's. Each path decompresses the
    stored value again, so ask for few."""
    values = ScoreRun.objects.filter(pk=run.pk).values_list(*(JsonAt("details", *p) for p in paths))
    return list(values.get())


def group_details(run: ScoreRun, group: str) -> RunDetails:
    """What one group's board reads of a run's details (its BoardSlice: the headline and the
    group's paired tests in Brier loss, what the letters are made from); empty for a group the
    run did not score."""
    cohort = None if group == "all" else int(group)
    details = board_slice(run.pk, cohort).values_list("details", flat=True).first()
    return RunDetails.from_json(details)


def board_details(
    run_ids: Iterable[int], cohort_ids: Iterable[int] | None = None, all_cohorts: bool = True
) -> dict[tuple[int, int | None], RunDetails]:
    """The boards' slices of these runs in one query, by (run id, cohort id; None for all
    cohorts): of every group, or of these cohorts and (with `all_cohorts`) the all-cohorts
    board. A board with none (a group the run did not score) is not in the result."""
    slices = BoardSlice.objects.filter(run_id__in=list(run_ids))
    if cohort_ids is not None:
        groups = Q(cohort_id__in=list(cohort_ids))
        slices = slices.filter(groups | Q(cohort__isnull=True) if all_cohorts else groups)
    elif not all_cohorts:
        slices = slices.filter(cohort__isnull=False)
    rows = slices.values_list("run_id", "cohort_id", "details")
    return {(run, cohort): RunDetails.from_json(details) for run, cohort, details in rows}


def board_slice(run_id: int | OuterRef, cohort_id: int | OuterRef | None) -> QuerySet[BoardSlice]:
    """The BoardSlice of a run and a cohort (None: all cohorts); either may be an OuterRef."""
    # django-stubs checks a lookup's value against the field alone, not an expression.
    return BoardSlice.objects.filter(run_id=run_id, cohort_id=cohort_id)  # type: ignore[misc]


def slice_details(group: str, headline: object, dm: object) -> RunDetails:
    """RunDetails of one group from its slices (details_at): the run's headline object and
    the group's paired tests (or some of their tables)."""
    rule = headline.get("rule") if isinstance(headline, dict) else None
    by_cohort = headline.get("by_cohort") if isinstance(headline, dict) else None
    if not isinstance(by_cohort, dict):
        by_cohort = {}
    return RunDetails(
        headline_rule=rule,
        headline_by_cohort={group: by_cohort[group]} if group in by_cohort else {},
        dm={group: DmTables.from_json(dm)} if dm is not None else {},
    )
