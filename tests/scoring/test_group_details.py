"""scoring.selectors.group_details: one group's slice of a run's details, read by the database,
equal to what the whole details say of that group, on SQLite and PostgreSQL alike."""

from datetime import UTC, datetime

import pytest

from scoring.models import ScoreRun
from scoring.selectors import group_details
from scoring.stored import DmPair, DmTables, RunDetails

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 1, tzinfo=UTC)


def _pairs(tag: str) -> list[DmPair]:
    slugs = ["a", "b", "c"]
    return [
        DmPair(x, y, 30, -0.01, -2.5, 0.01, 0.05, f"{tag}-{x}-{y}")
        for i, x in enumerate(slugs)
        for y in slugs[i + 1 :]
    ]


def _run(details: RunDetails) -> ScoreRun:
    return ScoreRun.objects.create(
        scope="live", status="done", as_of=AT, started_at=AT, finished_at=AT,
        methodology_version="1", methodology_hash="0" * 64, engine_version="1",
        details=details.to_json(),
    )  # fmt: skip


def test_each_groups_slice_equals_the_whole_details():
    # Cohort ids are keys of digits: read as array indexes, they would slice nothing.
    groups = ["all", "7", "12", "0"]
    whole = RunDetails(
        headline_rule="rule text",
        headline_by_cohort={
            g: ("return_pct" if g == "12" else "brier_skill_vs_market") for g in groups
        },
        dm={g: DmTables(_pairs(g), _pairs(f"log{g}"), 40) for g in groups},
        notes=["a note"],
    )
    run = _run(whole)
    stored = ScoreRun.objects.get(pk=run.pk).stored_details
    for g in groups:
        part = group_details(run, g)
        assert part.headline(g) == stored.headline(g)
        assert part.dm_for(g).brier == stored.dm_for(g).brier
        assert part.dm_for(g).log == []  # the letters are made from the Brier tests alone
        assert part.dm_for(g).brier[0].verdict == f"{g}-a-b"  # this group's, not another's
        assert part.headline_rule == "rule text"
        assert part.notes == []  # the rest is not read


def test_a_group_the_run_has_not_scored_reads_empty():
    run = _run(RunDetails(headline_by_cohort={"all": "brier_skill_vs_market"}))
    part = group_details(run, "3")
    assert part.headline("3") is None
    assert part.dm_for("3").brier == []
    empty = group_details(_run(RunDetails()), "all")
    assert empty.headline("all") is None and empty.headline_rule is None
