"""The cohorts page names each cohort's leader from the leaderboard rows' columns and its
board slice: a fixed number of queries however many cohorts it lists, none of them reading a
row's own details (its calibration, decomposition and tournament take, which only the
leaderboard API shows)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cohorts.models import Cohort
from scoring.models import LeaderboardRow
from tests.site.conftest import build_arena
from web.leaders import cohort_leaders

pytestmark = pytest.mark.django_db


def scored_cohorts(world, n: int) -> list[Cohort]:
    cohorts = [build_arena(world, kind=Cohort.Kind.LIVE, n_competitors=2) for _ in range(n)]
    run = world.score_run("live")
    for row in LeaderboardRow.objects.filter(run=run, cohort__isnull=True):
        for cohort in cohorts:
            row.pk, row.cohort = None, cohort
            row.save()
    return cohorts


def leaders_read(cohorts: list[Cohort]) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        leads = cohort_leaders(cohorts)
        names = {pk: (lead["leader"].display_name, lead["runner_up"].display_name)
                 for pk, lead in leads.items()}  # fmt: skip
    return names, [q["sql"] for q in queries]


def test_each_cohorts_leader_in_a_fixed_number_of_queries_without_row_details(world):
    cohorts = scored_cohorts(world, 4)
    first, second = (c.display_name for c in world.competitors[:2])
    names, sql = leaders_read(cohorts[:1])
    assert names == {cohorts[0].pk: (first, second)}
    names, more = leaders_read(cohorts)
    assert names == {c.pk: (first, second) for c in cohorts}
    assert len(more) == len(sql)  # no query per cohort or per row
    rows = [s for s in more if 'FROM "scoring_leaderboardrow"' in s]
    assert rows and all('"scoring_leaderboardrow"."details"' not in s for s in rows), rows
