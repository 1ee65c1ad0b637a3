"""selectors.cohort_universes: one query gives the cohort page every week's freeze (its chart's
decision events) and the latest week's markets (its universe table), never another cohort's and
never an older week's markets; the entry table's counts come from entry_rows' one query."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cohorts.models import Cohort, Position, Universe
from tests.site.conftest import T0, World, build_arena
from web import selectors

pytestmark = pytest.mark.django_db


def _universe(cohort: Cohort, week: int, questions: list[str]) -> Universe:
    return Universe.objects.create(
        cohort=cohort, week=week, frozen_at=cohort.week_start + timedelta(weeks=week - 1),
        content_hash=f"{week}" * 64,
        markets=[{"market_id": i, "question": q} for i, q in enumerate(questions)],
    )  # fmt: skip


def test_every_weeks_freeze_and_only_the_latest_markets():
    world = World()
    cohort, other = world.cohort(), world.cohort(weeks_ago=3)
    _universe(cohort, 2, ["second week?"])
    _universe(cohort, 1, ["first week?"])
    _universe(cohort, 3, ["third week?", "and another?"])
    _universe(other, 4, ["another cohort's?"])
    with CaptureQueriesContext(connection) as ctx:
        read = selectors.cohort_universes(cohort)
    assert len(ctx.captured_queries) == 1
    assert [w for w, _ in read.frozen] == [1, 2, 3]
    assert read.frozen[0][1] == T0
    assert read.latest_week == 3
    assert [m["question"] for m in read.latest_markets] == ["third week?", "and another?"]


def test_a_cohort_before_its_first_freeze_has_none():
    read = selectors.cohort_universes(World().cohort())
    assert (read.frozen, read.latest_week, read.latest_markets) == ([], None, [])


def test_entry_figures_count_each_entrys_own_positions_and_trades():
    world = World()
    cohort = build_arena(world, n_competitors=2)
    first = world.entries[0]
    market = world.markets[-1]
    Position.objects.create(
        entry=first, market=market, outcome="Yes", shares=Decimal("10"),
        cost_basis=Decimal("7.25"), status=Position.Status.SETTLED, opened_at=T0,
    )  # fmt: skip
    rows = {e.pk: e for e in selectors.entry_rows(cohort)}
    for e in world.entries:
        positions = Position.objects.filter(entry=e)
        open_ = positions.filter(status=Position.Status.OPEN)
        assert rows[e.pk].n_trades == e.trades.count()
        assert rows[e.pk].n_open == open_.count()
        assert rows[e.pk].n_resolved == positions.filter(status=Position.Status.SETTLED).count()
        assert rows[e.pk].invested == sum((p.cost_basis for p in open_), Decimal("0.00"))
    assert rows[first.pk].n_resolved >= 1
