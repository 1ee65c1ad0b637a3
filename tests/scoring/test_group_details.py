"""scoring.selectors.group_details: one group's BoardSlice of a run's details, stored when the
run is scored (scoring.services.store_board_slices) or by the migration that introduced them,
equal to what the whole details say of that group, on SQLite and PostgreSQL alike."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from cohorts.models import Cohort
from scoring.models import BoardSlice, ScoreRun
from scoring.selectors import group_details
from scoring.services import store_board_slices
from scoring.stored import DmPair, DmTables, RunDetails

AT = datetime(2026, 11, 1, tzinfo=UTC)
RUN = dict(
    scope="live", status="done", as_of=AT, started_at=AT, finished_at=AT,
    methodology_version="1", methodology_hash="0" * 64, engine_version="1",
)  # fmt: skip


def _pairs(tag: str) -> list[DmPair]:
    slugs = ["a", "b", "c"]
    return [
        DmPair(x, y, 30, -0.01, -2.5, 0.01, 0.05, f"{tag}-{x}-{y}")
        for i, x in enumerate(slugs)
        for y in slugs[i + 1 :]
    ]


def _groups(n: int) -> list[str]:
    weeks = [AT - timedelta(weeks=w) for w in range(n)]
    return ["all", *(str(Cohort.objects.create(kind="live", week_start=w).pk) for w in weeks)]


def _whole(groups: list[str]) -> RunDetails:
    return RunDetails(
        headline_rule="rule text",
        headline_by_cohort={
            g: ("return_pct" if g == groups[-1] else "brier_skill_vs_market") for g in groups
        },
        dm={g: DmTables(_pairs(g), _pairs(f"log{g}"), 40) for g in groups},
        notes=["a note"],
    )


def _run(details: RunDetails) -> ScoreRun:
    run = ScoreRun.objects.create(**RUN, details=details.to_json())
    store_board_slices(run, details)
    return run


def _assert_sliced(run: ScoreRun, groups: list[str]) -> None:
    stored = ScoreRun.objects.get(pk=run.pk).stored_details
    for g in groups:
        part = group_details(run, g)
        assert part.headline(g) == stored.headline(g)
        assert part.dm_for(g).brier == stored.dm_for(g).brier
        assert part.dm_for(g).log == []  # the letters are made from the Brier tests alone
        assert part.dm_for(g).brier[0].verdict == f"{g}-a-b"  # this group's, not another's
        assert part.headline_rule == "rule text"
        assert part.notes == []  # the rest is not read


@pytest.mark.django_db
def test_each_groups_slice_equals_the_whole_details():
    groups = _groups(3)
    _assert_sliced(_run(_whole(groups)), groups)


@pytest.mark.django_db
def test_a_group_the_run_has_not_scored_reads_empty():
    (_, cohort) = _groups(1)
    run = _run(RunDetails(headline_by_cohort={"all": "brier_skill_vs_market"}))
    part = group_details(run, cohort)
    assert part.headline(cohort) is None
    assert part.dm_for(cohort).brier == []
    empty = group_details(_run(RunDetails()), "all")
    assert empty.headline("all") is None and empty.headline_rule is None


@pytest.mark.django_db
def test_a_group_has_one_slice_per_run():
    groups = _groups(1)
    run = _run(_whole(groups))
    with pytest.raises(Exception):  # noqa: B017, PT011  the database's own IntegrityError
        store_board_slices(run, _whole(groups))


BEFORE = [("scoring", "0004_rehearsal_scope")]


@pytest.mark.django_db(transaction=True)
def test_runs_scored_before_board_slices_get_theirs():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    old_cohort = old.get_model("cohorts", "Cohort")
    weeks = [AT - timedelta(weeks=w) for w in range(2)]
    groups = ["all", *(str(old_cohort.objects.create(kind="live", week_start=w).pk) for w in weeks)]
    whole = _whole(groups).to_json()
    whole["dm"]["999"] = whole["dm"][groups[1]]  # a cohort deleted since: no slice for it
    run_pk = old.get_model("scoring", "ScoreRun").objects.create(**RUN, details=whole).pk

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    run = ScoreRun.objects.get(pk=run_pk)
    assert BoardSlice.objects.filter(run=run).count() == len(groups)
    _assert_sliced(run, groups)
